"""``logprobs_generated``: the logprobs handed back are the ones the model reported for that turn.

``finite_logprobs`` cannot tell a NaN replaced by 0.0 (``nan_to_num``) from a real value, and the
trainer's importance ratio is then computed against a number nobody produced. So each turn of a
completed (or truncated) rollout is held against the fault layer's record: the answer that
generated the turn's ids (gym style: one of its row's successful ``/run`` answers with the same
generations; native style: a model call of its row, or an untied one, with that generation)
must have reported logprobs that agree with the turn's (``rules.digests_agree``: within
``LOGPROB_TOLERANCE`` per token, so a float32 copy passes). A non-finite value handed back where
the model reported one is ``finite_logprobs``' business; a turn the model never generated is
``turns_generated``'s. A rollout is judged only where the record holds the answer of its turns;
with none of those, nothing is judged (NOT_JUDGED), and the summary counts those judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pytest_rollout_chaos.collector.protocol import Rollout
from pytest_rollout_chaos.history import fingerprint, logprob_digest
from pytest_rollout_chaos.invariants.base import (
    Observation,
    Status,
    Verdict,
    not_judged,
    story,
    turns_handed_on,
    verdict,
)
from pytest_rollout_chaos.invariants.rules import digests_agree
from pytest_rollout_chaos.invariants.served import Served, served

Judged = tuple[bool, str | None]  # (the record held what to compare with, the problem found)


class LogprobsGenerated:
    name: ClassVar[str] = "logprobs_generated"

    def check(self, observation: Observation) -> Verdict:
        claimed = turns_handed_on(observation, self.name, "logprob")
        if isinstance(claimed, Verdict):
            return claimed
        record = served(observation.history)
        if record.style is None or not _has_logprobs(record):
            return not_judged(
                self.name,
                f"{len(claimed)} rollouts hand back logprobs, but the History holds no server-side record "
                "of the logprobs the model reported (no fault layer in front of the servers?)",
            )
        check = _gym_problem if record.style == "gym" else _native_problem
        judged = [check(rollout, record) for rollout in claimed]
        held = sum(1 for found, _ in judged if found)
        problems = [problem for _, problem in judged if problem is not None]
        if not held:
            return not_judged(
                self.name,
                f"the turns of none of {len(claimed)} rollouts are in an answer that reported logprobs, so "
                "there is nothing to compare with (turns_generated judges turns no answer generated)",
            )
        if not problems:
            return verdict(
                self.name,
                Status.PASS,
                f"the logprobs of {held} of {len(claimed)} rollouts are the ones the model reported for "
                "their turns" + (" (the others' turns are in no answer)" if held < len(claimed) else ""),
            )
        return verdict(
            self.name,
            Status.FAIL,
            story(
                observation,
                what=(
                    f"{len(problems)} rollouts hand back logprobs the model never reported for their turns "
                    "(replaced, zeroed or invented): the trainer's ratios would be computed against them"
                ),
                expected=(
                    "each turn's logprobs as the model reported them; a row whose logprobs are unusable "
                    "retried or aborted with the reason, never patched"
                ),
            ),
            problems,
        )


def _has_logprobs(record: Served) -> bool:
    calls = [call for calls in record.by_row.values() for call in calls] + record.untied
    return any(call.logprobs for call in calls)


def _digests(rollout: Rollout) -> list[str]:
    return [logprob_digest(turn.generation_log_probs) for turn in rollout.turns]


def _gym_problem(rollout: Rollout, record: Served) -> Judged:
    claimed = [fingerprint(turn.generation_token_ids) for turn in rollout.turns]
    answers = [
        call
        for call in record.calls(rollout.row_index)
        if call.succeeded and list(call.generations) == claimed and len(call.logprobs) == len(claimed)
    ]
    if not answers:
        return False, None  # turns no answer generated: turns_generated judges those
    handed = _digests(rollout)
    if any(all(map(digests_agree, answer.logprobs, handed)) for answer in answers):
        return True, None
    recorded = answers[-1].logprobs
    pairs = enumerate(zip(recorded, handed, strict=True))
    turns = [index for index, (mine, theirs) in pairs if not digests_agree(mine, theirs)]
    return True, (
        f"row {rollout.row_index}: turns {turns} hand back logprobs {_shown(handed, turns)} "
        f"(count:sum:weighted sum) where the row's /run answered {_shown(recorded, turns)}"
    )


def _native_problem(rollout: Rollout, record: Served) -> Judged:
    calls = [call for call in record.calls(rollout.row_index) if call.succeeded] + [
        call for call in record.untied if call.succeeded
    ]
    reported: dict[str, list[str]] = {}
    for call in calls:
        for generation, digest in zip(call.generations, call.logprobs, strict=False):
            reported.setdefault(generation, []).append(digest)
    bad = []
    found = False
    for index, turn in enumerate(rollout.turns):
        known = reported.get(fingerprint(turn.generation_token_ids))
        if not known:
            continue
        found = True
        digest = logprob_digest(turn.generation_log_probs)
        if not any(digests_agree(value, digest) for value in known):
            bad.append(f"turn {index}: {digest} where the policy answered {known[-1]}")
    if not bad:
        return found, None
    return True, f"row {rollout.row_index} (count:sum:weighted sum): " + "; ".join(bad)


def _shown(digests: Sequence[str], turns: Sequence[int]) -> list[str]:
    return [digests[index] for index in turns]
