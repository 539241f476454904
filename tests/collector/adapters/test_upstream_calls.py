"""What an adapter ran of its trainer's code, read back from the History: calls, outcomes, stand-ins."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.collector.adapters import skyrl, slime
from pytest_rollout_chaos.collector.adapters.upstream_calls import (
    UpstreamCall,
    gym_clients,
    recorded,
    summary,
)
from pytest_rollout_chaos.history import History

GENERATION_CALL = "slime.rollout.generate_and_rm_group, a task per group"
TRAIN_CALL = "slime.ray.rollout.RolloutManager.generate"
GENERATION: dict[str, object] = {"call": GENERATION_CALL, "rollout_id": 0}
TRAIN: dict[str, object] = {"call": TRAIN_CALL, "rollout_id": 0}


def slime_step(history: History, *, fail_training: bool = False) -> None:
    """One slime collection's calls, recorded by slime's own ``upstream_call``."""
    with slime.upstream_call(history, GENERATION, ["the hook", "the loop"]) as done:
        done["groups"] = 1
    with slime.upstream_call(history, TRAIN, ["the hook", "the DP split"], read_out=slime.READ_OUT):
        if fail_training:
            raise ValueError("no tokens")


def test_each_call_is_read_with_its_outcome_its_stand_ins_and_the_read_out_point() -> None:
    history = History()
    history.append("collector", "invoke", "collect", {"rows": 2})  # the collection, not a call
    slime_step(history)
    assert recorded(history) == [
        UpstreamCall(GENERATION_CALL, "ok", ("the hook", "the loop")),
        UpstreamCall(TRAIN_CALL, "ok", ("the hook", "the DP split"), read_out=slime.READ_OUT),
    ]
    assert summary(history) == {
        "read_out": slime.READ_OUT,
        "calls": [call.to_data() for call in recorded(history)],
        "stood_in": ["the hook", "the loop", "the DP split"],
        "gym_clients": [],
    }


def test_a_call_that_raised_is_fail_with_its_error_and_one_never_ended_is_open() -> None:
    history = History()
    with pytest.raises(ValueError, match="no tokens"):
        slime_step(history, fail_training=True)
    history.append("collector", "invoke", "upstream", {"call": "grpo_train, rollout to policy.train"})
    generation, training, cut_short = recorded(history)
    assert generation.outcome == "ok"
    assert (training.outcome, training.error) == ("fail", "ValueError: no tokens")
    assert (cut_short.outcome, cut_short.stood_in, cut_short.read_out) == ("open", (), "")


def test_a_call_recorded_under_its_own_op_counts_when_it_lists_what_it_stands_in_for() -> None:
    history = History()
    data = {"rows": 4, "stood_in": list(skyrl.STOOD_IN), "call": skyrl.CALL, "read_out": skyrl.READ_OUT}
    history.append("collector", "invoke", "generate", data)
    history.append("collector", "invoke", "generate_sequences", {"rows": 4})  # no call, no stand-ins
    history.append("collector", "ok", "generate", {**data, "returned": 4})
    [call] = recorded(history)
    assert (call.call, call.outcome, call.read_out) == (skyrl.CALL, "ok", skyrl.READ_OUT)
    assert call.stood_in == skyrl.STOOD_IN


def test_which_gym_client_ran_is_read_once_each() -> None:
    history = History()
    own = {"call": "RolloutCollectionHelper()", "client": "NeMo Gym's own", "nemo_gym": "0.5.0"}
    for _ in range(2):
        history.append("collector", "info", "upstream", own)
    history.append("collector", "info", "gym_client", {"client": "stand-in over ctx.gym"})
    assert gym_clients(history) == ["NeMo Gym's own (nemo_gym 0.5.0)", "stand-in over ctx.gym"]
    assert recorded(history) == []  # an info event is no call


def test_a_collector_that_is_no_adapter_has_an_empty_summary() -> None:
    history = History()
    history.append("collector", "invoke", "collect", {"rows": 1, "style": "gym"})
    history.append("collector", "invoke", "run", {"row": 0, "agent": "calculator_agent"})
    history.append("collector", "ok", "run", {"row": 0})
    history.append("collector", "ok", "collect", {"returned": 1})
    assert summary(history) == {}
