"""A failing run's text lists what an adapter gave the trainer, every setting and why, and what of the
trainer's path it stood in for."""

from __future__ import annotations

from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings
from pytest_rollout_chaos.engine.story import failure_text, settings_section
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.invariants.base import Status, Verdict
from tests.report._builders import result


def test_the_failure_text_lists_the_settings_given_to_the_trainer() -> None:
    outcome = result("adapter-run", verdicts=[Verdict("accounted", Status.FAIL, "row 2 has no rollout", ())])
    taken = TrainerSettings(
        "nemo_rl",
        {"nemo_rl.policy.generation.vllm_cfg.async_engine": True},
        ["policy.generation.vllm_cfg.async_engine"],
    )
    taken.default("policy.generation.vllm_cfg.async_engine", False, "grpo.py:992")
    taken.run("grpo.max_val_samples", 8, "the rows asked for")
    taken.record(outcome.history, mode="validation", variant="async_engine")
    text = failure_text(outcome)
    assert (
        "settings given to nemo_rl (mode validation, variant async_engine):\n"
        "  nemo_rl: policy.generation.vllm_cfg.async_engine = True (scenario: grpo.py:992)\n"
        "  nemo_rl: grpo.max_val_samples = 8 (run: the rows asked for)\n"
    ) in text
    assert text.index("settings given to") < text.index("timeline")


def test_a_collector_that_is_no_adapter_has_no_settings_section() -> None:
    assert settings_section(History()) == []


def test_the_failure_text_lists_what_the_adapter_stood_in_for_once_per_call() -> None:
    outcome = result("adapter-run", verdicts=[Verdict("accounted", Status.FAIL, "row 2 has no rollout", ())])
    call = {"call": "slime.ray.rollout.RolloutManager.generate", "stood_in": ["the hook", "the DP split"]}
    outcome.history.append("collector", "invoke", "upstream", {**call, "rollout_id": 0})
    outcome.history.append("collector", "invoke", "upstream", {**call, "rollout_id": 1})
    outcome.history.append("collector", "invoke", "upstream", {"call": "listing nothing"})
    text = failure_text(outcome)
    assert (
        "stood in for, on the way to slime.ray.rollout.RolloutManager.generate:\n  the hook\n  the DP split\n"
    ) in text
    assert text.count("stood in for") == 1
    assert text.index("stood in for") < text.index("timeline")
