"""The ``nemo_rl`` adapter on NeMo RL main (7ea279ab): train mode through main's streaming actor and
main's own copy of ``grpo_train``'s step, validation through main's ``validate()``.

One child pytest runs a few scenarios on the pinned main tree (the whole catalog's verdicts are
in the session report that pinned it; it takes too long for CI). ``baseline`` passing shows main's
copy ran: the copy of the older trees would be declined there (a skip, not a pass). The others are
the verdicts NeMo RL main earns for its own code: the short count raises (#2394 kept), a NaN
logprob fails the whole batch at once (#3000 removed the retry), and validation on the async
engine still steps the environment once per sample (#2209 never merged), and at NeMo Gym's
``seq_logprob_error_threshold`` of 2 a row whose logprobs drifted from the policy's is masked out.
"""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.collector.adapters import nemo_rl_settings, own_gym
from tests.catalog._verdicts import ScenarioVerdicts, run_catalog
from tests.collector.adapters._nemo_rl_trees import MAIN, nemo_rl_tree

SCENARIOS = [
    "baseline",
    "short-results",
    "nan-logprobs-nan",
    "validation-batched-env",
    "logprob-drift-masked",
]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScenarioVerdicts]:
    tree = nemo_rl_tree(MAIN, tmp_path_factory.mktemp("nemo-rl-main"))
    scratch = tmp_path_factory.mktemp("catalog")
    return run_catalog(
        scratch, target="nemo_rl", scenarios=SCENARIOS, stack_args=[f"--rollout-chaos-upstream={tree}"]
    )


@pytest.mark.slow
def test_baseline_passes_on_main_through_mains_own_copy(verdicts: dict[str, ScenarioVerdicts]) -> None:
    baseline = verdicts["baseline"]
    assert baseline.skipped is None, baseline.skipped  # the older trees' copy is declined here
    assert baseline.passed, baseline.message
    assert baseline.invariants["train_batch_sound"] == "PASS"


@pytest.mark.slow
def test_main_still_raises_on_a_short_count(verdicts: dict[str, ScenarioVerdicts]) -> None:
    """#2394's check survives the streaming rewrite: the stream ends before every row arrived."""
    assert verdicts["short-results"].passed, verdicts["short-results"].message


@pytest.mark.slow
def test_a_nan_logprob_fails_mains_whole_batch_at_once(verdicts: dict[str, ScenarioVerdicts]) -> None:
    """Before #3000 the actor retried the batch (once, by default) and trained the NaN
    (``finite_logprobs`` FAIL); main's actor raises on the first NaN row, so the batch dies for
    one row's trouble. With NeMo Gym's own client the batch dies one step sooner, in NeMo Gym:
    ``server_utils.get_response_json`` parses the ``/run`` answer with ``orjson``, which rejects
    the ``NaN`` token (RFC 8259), so NeMo RL's NaN check never sees the row."""
    nan = verdicts["nan-logprobs-nan"]
    assert not nan.passed
    assert nan.invariants["isolated_failures"] == "FAIL", nan.message
    assert nan.invariants["raise_has_cause"] == "FAIL", nan.message
    assert nan.invariants["finite_logprobs"] == "PASS", nan.message
    if own_gym.version() is None:  # the stand-in reads /run as Python's json does, NaN included
        assert "Generation logprobs contain NaN" in nan.message
    else:  # NeMo Gym's own client reads /run with orjson (RFC 8259: no NaN): it raises first
        assert "JSONDecodeError" in nan.message, nan.message
        assert "get_response_json" in nan.message, nan.message
    # main's NemoGym has no retry knob, so the adapter hands it none (the settings the story lists)
    assert "settings given to nemo_rl (mode train)" in nan.message
    assert nemo_rl_settings.NAN_RETRIES not in nan.message


@pytest.mark.slow
def test_mains_validate_still_steps_the_environment_per_sample(
    verdicts: dict[str, ScenarioVerdicts],
) -> None:
    """``validate()`` on the async engine calls ``run_async_multi_turn_rollout``: one env call per
    sample per turn, as before #2209 (never merged)."""
    validation = verdicts["validation-batched-env"]
    assert validation.skipped is None, validation.skipped
    assert validation.invariants["batched_env_eval"] == "FAIL", validation.message
    assert "run_async_multi_turn_rollout" in validation.message or "env.step" in validation.message


@pytest.mark.slow
def test_mains_sequence_logprob_masking_leaves_the_drifted_row_out_of_the_loss(
    verdicts: dict[str, ScenarioVerdicts],
) -> None:
    """The policy's own weights score the batch (``nemo_rl_policy``), so the drifted row's error
    exceeds the threshold and NeMo RL zeroes its ``sample_mask``: judged, and held."""
    drift = verdicts["logprob-drift-masked"]
    assert drift.passed, drift.message
    assert drift.invariants["drifted_logprobs_masked"] == "PASS", drift.message
