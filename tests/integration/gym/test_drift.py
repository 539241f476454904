"""Splicing off (vanilla vLLM behaviour): retokenization drift happens for real with the tiny model.

The tiny model writes its tool-call JSON compact or spaced; the chat template re-renders parsed
arguments spaced, so the next prompt does not always start with what the model produced.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from pytest_rollout_chaos.invariants.rules import first_mismatch
from pytest_rollout_chaos.servers.gym.stack import GymStack
from pytest_rollout_chaos.servers.policy.spec import PolicyServer

from ._helpers import run_rows, token_items, with_temperature
from .conftest import running_stack

pytestmark = pytest.mark.slow  # starts the policy and a Gym stack

LINKS: list[tuple[str, str]] = []


def _recording_link(name: str, upstream_url: str) -> str:
    LINKS.append((name, upstream_url))
    return upstream_url


@pytest.fixture(scope="module")
def vanilla_gym(chaos_policy: PolicyServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GymStack]:
    log_dir = tmp_path_factory.mktemp("gym-vanilla")
    with running_stack(log_dir, chaos_policy, splice=False, link=_recording_link) as stack:
        yield stack


def test_every_link_between_servers_goes_through_the_link_seam(vanilla_gym: GymStack) -> None:
    links = dict(LINKS)
    assert set(links) == {
        "model->policy",
        "agent->model",
        "agent->resources",
        "collector->resources",
        "collector->agent:calculator_agent",
        "collector->agent:echo_agent",
    }
    assert links["agent->model"] == vanilla_gym.processes["gym_model"].url
    assert links["collector->agent:echo_agent"] == vanilla_gym.agents["echo_agent"]


@pytest.mark.asyncio
async def test_without_splicing_later_prompts_drift_from_the_generated_tokens(vanilla_gym: GymStack) -> None:
    results = await run_rows(vanilla_gym, with_temperature(vanilla_gym.rows("calculator", 24), 1.0))
    transitions, drifted = 0, []
    for row, result in results:
        items = token_items(result["response"]["output"])
        for earlier, later in itertools.pairwise(items):
            transitions += 1
            generated = earlier["prompt_token_ids"] + earlier["generation_token_ids"]
            mismatch = first_mismatch(later["prompt_token_ids"], generated)
            if mismatch is not None:
                drifted.append((row["_rowidx"], mismatch, len(earlier["prompt_token_ids"])))
    assert transitions >= 8, f"only {transitions} multi-turn transitions to look at"
    assert drifted, "no drift in any rollout: re-rendering kept every generated token"
    # Drift is inside the generated part: the prompt of the earlier call itself is re-rendered alike.
    assert all(mismatch >= prompt_len for _row, mismatch, prompt_len in drifted), drifted
    assert len(drifted) < transitions, "every transition drifted: suspicious, the template should match often"
