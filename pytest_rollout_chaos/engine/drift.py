"""Whether the model can drift its own prompts on this stack, for the scenarios that wait for it.

A scenario with no fault that re-renders prompts (``stack.policy.splice_prefix: false``) and
witnesses ``prompt_ids_drifted`` waits for the model to write a tool call the chat template
re-renders differently. Real vLLM behind NeMo Gym's ``vllm_model`` (its chat path) makes that
rare: with strict tool calling, on by default since vLLM added it, the Hermes parser's structural
tag forces each call's envelope (``<tool_call>{"name": "...", "arguments": ``) exactly as the
template writes it, and only whitespace inside the arguments can still differ (about one row in
sixty with the tiny model). Such a scenario skips there, saying why and how to turn it off; the
faults that drift prompts in the network path (``prefix_drift``) act on every stack.
"""

from __future__ import annotations

from pytest_rollout_chaos.scenario.model import Scenario
from pytest_rollout_chaos.servers.nemo_gym.stack import NemoGymStack
from pytest_rollout_chaos.stack import ChaosStack

DRIFT_WITNESS = "prompt_ids_drifted"


def drift_prevented(scenario: Scenario, stack: ChaosStack) -> str | None:
    """Why the model's own drift that ``scenario`` waits for cannot happen on ``stack``, or None."""
    waits_for_the_model = (
        not scenario.faults
        and not scenario.stack.policy.splice_prefix
        and DRIFT_WITNESS in scenario.expect.witness
    )
    if not waits_for_the_model or not isinstance(stack.gym, NemoGymStack):
        return None
    if not any(replica.pins_tool_calls for replica in stack.started_replicas):
        return None
    return (
        f"expect.witness {DRIFT_WITNESS} waits for the model's own tool-call JSON to drift, and real vLLM's "
        "strict tool calling forces each Hermes tool call's envelope as the chat template writes it, so "
        "behind NeMo Gym's vllm_model it almost never does (set VLLM_ENFORCE_STRICT_TOOL_CALLING=0 for the "
        "policy to run it; policy-tokenize-drift drifts prompts on this stack)"
    )
