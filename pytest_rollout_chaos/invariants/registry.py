"""The built-in invariants by name; an explicit tuple, greppable, no import magic.

The names are an interface (ARCHITECTURE.md#history-and-invariants). ``STANDING`` names the
invariants every scenario is judged by, listed in ``expect.invariants`` or not: what no collector
may get away with anywhere. Those that hold the collector's claims against the servers' records
(every row accounted for, finite logprobs, rollouts that happened, turns, logprobs and rewards
the servers produced, a status the policy's finish reason bears out, bounded retries), the
empty-epoch check, the train batch the collector says it hands to training, its GRPO groups
whole or left out, a raise's cause, the caller's rows left as they were. A scenario lists what
is specific to it; ``judged`` gives its full list. A standing invariant that finds nothing to
judge says NOT_JUDGED silently; a listed one makes the scenario vacuous. ``STANDING_WITH_NEXT_STEPS``
stand where the scenario runs collections after the first (``workload.collections``), and only
there: elsewhere they would judge nothing on every scenario.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from pytest_rollout_chaos.invariants.accounted import Accounted
from pytest_rollout_chaos.invariants.attempts_bounded import AttemptsBounded
from pytest_rollout_chaos.invariants.base import Checker
from pytest_rollout_chaos.invariants.batched_env_eval import BatchedEnvEval
from pytest_rollout_chaos.invariants.bounded import Bounded
from pytest_rollout_chaos.invariants.cancel_honoured import CancelHonoured
from pytest_rollout_chaos.invariants.concurrency_bounded import ConcurrencyBounded
from pytest_rollout_chaos.invariants.conversation_carried import ConversationCarried
from pytest_rollout_chaos.invariants.corroborated import Corroborated
from pytest_rollout_chaos.invariants.drifted_logprobs_masked import DriftedLogprobsMasked
from pytest_rollout_chaos.invariants.ends_promptly import EndsPromptly
from pytest_rollout_chaos.invariants.finite_logprobs import FiniteLogprobs
from pytest_rollout_chaos.invariants.groups_intact import GroupsIntact
from pytest_rollout_chaos.invariants.isolated_failures import IsolatedFailures
from pytest_rollout_chaos.invariants.logprobs_generated import LogprobsGenerated
from pytest_rollout_chaos.invariants.next_steps_sound import NextStepsSound
from pytest_rollout_chaos.invariants.no_empty_epoch import NoEmptyEpoch
from pytest_rollout_chaos.invariants.no_silent_short_count import NoSilentShortCount
from pytest_rollout_chaos.invariants.outage_fails_collection import OutageFailsCollection
from pytest_rollout_chaos.invariants.prefix_consistent import PrefixConsistent
from pytest_rollout_chaos.invariants.prompts_sent import PromptsSent
from pytest_rollout_chaos.invariants.quiet_after_end import QuietAfterEnd
from pytest_rollout_chaos.invariants.raise_has_cause import RaiseHasCause
from pytest_rollout_chaos.invariants.retry_faithful import RetryFaithful
from pytest_rollout_chaos.invariants.rewards_recorded import RewardsRecorded
from pytest_rollout_chaos.invariants.root_cause_visible import RootCauseVisible
from pytest_rollout_chaos.invariants.row_deadline_kept import RowDeadlineKept
from pytest_rollout_chaos.invariants.rows_unchanged import RowsUnchanged
from pytest_rollout_chaos.invariants.status_recorded import StatusRecorded
from pytest_rollout_chaos.invariants.train_batch_sound import TrainBatchSound
from pytest_rollout_chaos.invariants.turns_generated import TurnsGenerated

CHECKERS: Final[tuple[Checker, ...]] = (
    Accounted(),
    NoSilentShortCount(),
    IsolatedFailures(),
    FiniteLogprobs(),
    PrefixConsistent(),
    PromptsSent(),
    BatchedEnvEval(),
    Bounded(),
    RootCauseVisible(),
    Corroborated(),
    TurnsGenerated(),
    LogprobsGenerated(),
    RewardsRecorded(),
    AttemptsBounded(),
    NoEmptyEpoch(),
    EndsPromptly(),
    QuietAfterEnd(),
    CancelHonoured(),
    RaiseHasCause(),
    StatusRecorded(),
    TrainBatchSound(),
    OutageFailsCollection(),
    GroupsIntact(),
    RowsUnchanged(),
    ConcurrencyBounded(),
    DriftedLogprobsMasked(),
    RetryFaithful(),
    ConversationCarried(),
    NextStepsSound(),
    RowDeadlineKept(),
)
BY_NAME: Final[dict[str, Checker]] = {checker.name: checker for checker in CHECKERS}
NAMES: Final = tuple(BY_NAME)
# The invariants that judge how the collector answers a server's exit (``judges_exits``), which
# the fit step asks of each scenario's list (``engine.fit.hidden_exit``).
JUDGING_EXITS: Final = frozenset(
    name for name, checker in BY_NAME.items() if getattr(checker, "judges_exits", False)
)
STANDING: Final[tuple[str, ...]] = (
    "accounted",
    "finite_logprobs",
    "corroborated",
    "turns_generated",
    "logprobs_generated",
    "rewards_recorded",
    "status_recorded",
    "attempts_bounded",
    "no_empty_epoch",
    "train_batch_sound",
    "groups_intact",
    "rows_unchanged",
    "concurrency_bounded",
    "row_deadline_kept",
    "raise_has_cause",
)


STANDING_WITH_NEXT_STEPS: Final[tuple[str, ...]] = ("next_steps_sound",)


def judged(listed: Iterable[str], *, next_steps: bool = False) -> tuple[str, ...]:
    """The invariants a scenario is judged by: those it lists, in its order, then each standing
    one it does not list, in ``STANDING`` order, then, with ``next_steps`` (it collects more than
    once), ``STANDING_WITH_NEXT_STEPS``; each name once."""
    more = STANDING_WITH_NEXT_STEPS if next_steps else ()
    return tuple(dict.fromkeys([*listed, *STANDING, *more]))


def get(name: str) -> Checker:
    """The invariant called ``name``; a ``KeyError`` listing the known names otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown invariant {name!r} (known: {', '.join(NAMES)})") from None
