"""The three GRPO group scenarios (groups of 4) through each trainer's own grouping, verdicts pinned.

Each adapter lays the workload's groups out as its trainer does (NeMo RL: ``repeat_interleave`` by
``grpo.num_generations_per_prompt``; verl: ``repeat(rollout.n, interleave=True)``; slime: one
``generate_and_rm_group`` per prompt of ``n_samples_per_prompt``). What each trainer then does is
pinned here, with upstream's reason, as the verdicts that fail: no trainer hands a group with a
placeholder on, so ``groups_intact`` holds wherever a train batch comes back, and what breaks is
elsewhere. SkyRL's loop never reaches the NeMo Gym agents these faults act on, so they skip there
by reach (not by the groups: the skyrl adapter lays them out as ``generator.n_samples_per_prompt``);
``test_skyrl`` pins that skip and SkyRL's verdicts on twins of these scenarios aimed at its own
requests (it runs on SkyRL's Python, in its own CI job).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from pytest_rollout_chaos.collector.adapters import own_gym
from tests.catalog._verdicts import run_catalog
from tests.collector.adapters._nemo_rl_trees import HEAD as NEMO_RL_HEAD
from tests.collector.adapters._nemo_rl_trees import nemo_rl_tree
from tests.collector.adapters._slime_trees import HEAD as SLIME_HEAD
from tests.collector.adapters._slime_trees import cannot_import, unpack
from tests.collector.adapters._trees import pinned_tree
from tests.collector.adapters._verl_trees import RECIPE_TREE, VERL_DEPENDENCIES

pytestmark = pytest.mark.slow

SCENARIOS: Final = ["group-trajectory-exception", "group-nan-logprobs", "group-agent-killed"]

# Each trainer's verdicts that fail, the same on all three: the reasons are upstream's code.
# - group-trajectory-exception: one /run's HTTP 500 takes the step down. NeMo RL's NemoGym actor
#   and verl's recipe await each /run with no isolation (GymRequestError escapes); slime after
#   #2078 isolates the member into a one-element list[Sample], and RolloutManager's metrics read
#   effective_response_length on it (AttributeError in slime/ray/rollout.py). No train batch, so
#   groups_intact holds; the raise names no batch-level cause.
# - group-nan-logprobs: no trainer checks logprobs on this path with the NaN on every attempt
#   (NeMo RL's one NaN retry by default sees NaN again); the member trains with them.
# - group-agent-killed: NeMo Gym's client retries the dead agent forever and no trainer has a
#   deadline on the step: the collection hangs to the scenario's deadline.
FAILING: Final = {
    "group-trajectory-exception": {"isolated_failures", "raise_has_cause"},
    "group-nan-logprobs": {"finite_logprobs"},
    "group-agent-killed": {"bounded", "ends_promptly"},
}
ERRORS: Final = {
    "nemo_rl": "GymRequestError: calculator_agent",
    "verl": "GymRequestError: calculator_agent",
    "slime": "'list' object has no attribute 'effective_response_length'",
}
# Where NeMo Gym is installed the nemo_rl and verl adapters run NeMo Gym's own client, and two of these are
# NeMo Gym's: its raise_for_status raises aiohttp's ClientResponseError for the 500 (the agent's
# text kept in response_content), and its get_response_json reads /run with orjson, which rejects
# the NaN token (RFC 8259), so the NaN member's step raises before any member trains with it.
OWN_GYM_FAILING: Final = {"group-nan-logprobs": {"isolated_failures", "raise_has_cause"}}
OWN_GYM_ERROR: Final = "ClientResponseError: 500"


def tree_for(target: str, into: Path) -> Path:
    if target == "nemo_rl":
        return nemo_rl_tree(NEMO_RL_HEAD, into)
    if target == "verl":
        return pinned_tree(RECIPE_TREE, into, needs=VERL_DEPENDENCIES, holds="nemo_gym", trainer="verl")
    tree = unpack(SLIME_HEAD, into)
    reason = cannot_import(tree)
    if reason is not None:
        pytest.skip(f"slime's rollout does not import in this interpreter: {reason}")
    return tree


@pytest.mark.parametrize("target", sorted(ERRORS))
def test_each_trainer_meets_the_group_scenarios_as_its_own_code_does(target: str, tmp_path: Path) -> None:
    tree = tree_for(target, tmp_path / "upstream")
    (tmp_path / "runs").mkdir()
    verdicts = run_catalog(
        tmp_path / "runs", target=target, scenarios=SCENARIOS, stack_args=[f"--rollout-chaos-upstream={tree}"]
    )
    real_gym = target in ("nemo_rl", "verl") and own_gym.version() is not None
    for name in SCENARIOS:
        result = verdicts[name]
        assert result.skipped is None, result.skipped
        failing = {invariant for invariant, status in result.invariants.items() if status == "FAIL"}
        expected = OWN_GYM_FAILING.get(name, FAILING[name]) if real_gym else FAILING[name]
        assert failing == expected, f"{target} on {name}:\n{result.message}"
        judged = result.invariants.get("groups_intact")
        assert judged == ("NOT_JUDGED" if name == "group-agent-killed" else "PASS"), result.message
    error = OWN_GYM_ERROR if real_gym else ERRORS[target]
    assert error in verdicts["group-trajectory-exception"].message
