"""What ``base`` asks of every invariant, held across the registry: NOT_JUDGED, with the reason, never
PASS, when it finds nothing of what it judges; a raise judged by the claim checks; and the fault
sentence every FAIL summary carries.

NOT_JUDGED has one case per path on which an invariant used to PASS without having judged anything:
no multi-turn rollout, no failure, no cancel, native style, no record, nothing handed back. The
fault sentence names each fault and its target, and a restart its server, never "? on ?".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from pytest_rollout_chaos.collector.protocol import Rollout, Turn
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants import registry
from pytest_rollout_chaos.invariants.base import Observation, Status, faults_text
from tests.invariants._builders import all_ok, observe, rollout
from tests.invariants._records import answered, run_answered

ONE_TURN = [Turn([1, 5, 6], [7, 8, 2], [-0.1, -0.2, -0.3])]


def _native() -> History:
    history = History()
    history.append("policy", "ok", "POST /v1/chat/completions", {"link": "collector->policy", "row": 0})
    return history


def _no_logprobs_recorded() -> History:
    history = History()
    history.append("agent", "ok", "POST /run", {"link": "collector->agent:a", "row": 0, "status": 200})
    return history


def _no_rewards_recorded() -> History:
    history = answered(1)
    bare = History()
    for event in history:
        bare.append(
            event.source, event.kind, event.op, {k: v for k, v in event.data.items() if k != "reward"}
        )
    return bare


def _aborted(n: int) -> list[Rollout | None]:
    return [rollout(index, "aborted", error="HTTP 500 from agent") for index in range(n)]


# (invariant, the observation, words the reason must hold)
CASES: list[tuple[str, Callable[[], Observation], str]] = [
    ("accounted", lambda: observe(0, []), "no row was requested"),
    ("no_silent_short_count", lambda: observe(0, []), "no row was requested"),
    ("no_empty_epoch", lambda: observe(0, []), "no row was requested"),
    ("isolated_failures", lambda: observe(4, all_ok(4)), "no trajectory failed"),
    ("cancel_honoured", lambda: observe(2, all_ok(2)), "nobody cancelled"),
    ("root_cause_visible", lambda: observe(2, all_ok(2)), "nothing failed"),
    (
        "prefix_consistent",
        lambda: observe(2, [rollout(0, turns=ONE_TURN), rollout(1, turns=ONE_TURN)]),
        "two",
    ),
    ("prefix_consistent", lambda: observe(2, _aborted(2)), "two"),
    ("finite_logprobs", lambda: observe(2, _aborted(2)), "no logprob"),
    ("finite_logprobs", lambda: observe(1, [rollout(0, turns=[])]), "no logprob"),
    ("corroborated", lambda: observe(2, _aborted(2)), "no rollout claims"),
    ("corroborated", lambda: observe(2, all_ok(2)), "no server-side record"),
    ("turns_generated", lambda: observe(2, _aborted(2)), "no rollout hands back turns"),
    ("turns_generated", lambda: observe(2, all_ok(2)), "no server-side record"),
    ("logprobs_generated", lambda: observe(2, _aborted(2)), "no rollout hands back turns"),
    ("logprobs_generated", lambda: observe(2, all_ok(2)), "no server-side record"),
    ("logprobs_generated", lambda: observe(1, [rollout(0)], history=_no_logprobs_recorded()), "logprobs"),
    ("rewards_recorded", lambda: observe(2, _aborted(2)), "no rollout hands back a reward"),
    ("rewards_recorded", lambda: observe(1, [rollout(0)], history=_native()), "native style"),
    ("rewards_recorded", lambda: observe(1, [rollout(0)]), "no server-side record"),
    (
        "rewards_recorded",
        lambda: observe(1, [rollout(0)], history=_no_rewards_recorded()),
        "carries a reward",
    ),
    (
        "attempts_bounded",
        lambda: replace(observe(1, None, raised=RuntimeError("x")), max_attempts=3),
        "nothing to count",
    ),
    ("batched_env_eval", lambda: observe(2, all_ok(2)), "no step_batch"),
    ("raise_has_cause", lambda: observe(2, all_ok(2)), "did not raise"),
]


@pytest.mark.parametrize(("name", "make", "reason"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_finding_nothing_to_judge_is_not_judged_with_the_reason(
    name: str, make: Callable[[], Observation], reason: str
) -> None:
    verdict = registry.get(name).check(make())
    assert verdict.status.value == "NOT_JUDGED", verdict
    assert reason in verdict.summary


def test_a_raise_is_judged_by_the_claim_checks() -> None:
    """Raising hands the trainer nothing: what the claim checks guard is judged, and held."""
    history = History()
    run_answered(history, 0)
    observation = observe(1, None, history=history, raised=RuntimeError("agent unreachable"))
    for name in (
        "finite_logprobs",
        "corroborated",
        "turns_generated",
        "logprobs_generated",
        "rewards_recorded",
    ):
        assert registry.get(name).check(observation).status is Status.PASS, name


def test_every_invariant_says_not_judged_only_with_a_reason() -> None:
    for name, make, _ in CASES:
        verdict = registry.get(name).check(make())
        assert verdict.summary.strip(), name


def test_every_fault_event_names_its_fault_and_target_or_server() -> None:
    history = History()
    history.append("fault", "info", "inject", {"fault": "kill", "target": "calculator_agent"})
    history.append("fault", "info", "heal", {"fault": "kill", "target": "calculator_agent"})
    history.append("fault", "info", "restart", {"server": "calculator_agent", "port": 4100})
    text = faults_text(history)
    assert text.startswith("faults: inject kill on calculator_agent at t=")
    assert "; heal kill on calculator_agent at t=" in text
    assert "; restart of calculator_agent at t=" in text
    assert "?" not in text
