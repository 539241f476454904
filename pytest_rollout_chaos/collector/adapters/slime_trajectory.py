"""The ``slime`` adapter's generate hook, past the ``/run``: one NeMo Gym result into the training
sample(s) slime makes of an agent trajectory, by whichever of slime's two trajectory APIs the tree
has. The hook has no trajectory code of its own: it hands slime the model calls and takes back
what slime builds of them.

**Before slime's ``TrajectoryManager``** (the PR #2078 trees): each model call is a
``TurnRecord``, ``merge_turns`` stitches them into one segment (model tokens loss-mask 1, tool
and template tokens 0; on prefix drift it restarts or truncates the segment and masks), and
``write_segment_to_sample`` fills the one Sample. The hook returns that Sample.

**Since it** (THUDM/slime #2005; main): the hook follows slime's own agent path, the
coding-agent example's ``generate``: slime's ``OpenAIAdapter`` (built, never served: NeMo Gym's
agent makes the model calls, so the HTTP turn pipeline does not run) opens a session, each model
call is recorded with ``record_turn`` as ``_run_turn`` records it, and ``finish_session`` drains
the session: ``get_trajectory`` linearizes the turns into one Sample per chain, forking a new
Sample where a prompt drifts too far from the tokens held and masking a short drift (REALIGN).
The hook returns that ``list[Sample]``, the shape slime's fan-out generate functions yield;
``generate_and_rm`` and ``RolloutManager`` take it from there. ``record_turn`` routes by chat
messages: they are the ones NeMo Gym's model server renders each call from
(``servers.gym.convert``), put through slime's ``OpenAIAdapter._translate`` as a request of it
would be; one Gym trajectory is one chain of them.

On both: the reward is the Gym result's, handed to slime as the result holds it (``/verify``
scored it; slime's ``rm_hub`` has no NeMo Gym verifier), and a trajectory whose last model call
stopped at the token limit is TRUNCATED, as slime's agent examples mark a ``length`` finish (on
the manager's path slime itself records it as ``metadata["truncated"]``, read from the last
turn's ``finish_reason``, which the hook sets to ``length`` then). A result with no generation
data raises.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pytest_rollout_chaos.collector import results
from pytest_rollout_chaos.servers.gym import convert

OPENAI_ADAPTER_MODULE: Final = "slime.agent.adapters.openai"
STOOD_IN: Final = (
    "a trajectory whose last model call stopped at the token limit (the Gym result's "
    "incomplete_details) is marked TRUNCATED by the generate hook, as slime's agent examples mark a "
    "'length' finish",
)
"""What the hook adds to what slime's trajectory code makes (recorded with each ``RolloutManager`` call)."""
MANAGER_STOOD_IN: Final = (
    "the agent's HTTP turn pipeline (OpenAIAdapter._run_turn): NeMo Gym's agent makes the model "
    "calls; each is recorded with TrajectoryManager.record_turn as _run_turn records it, routed by "
    "the chat messages NeMo Gym's model server rendered it from",
)
"""Stood in only on trees with slime's ``TrajectoryManager``."""


def uses_manager(trajectory: Any) -> bool:
    """Whether the tree's ``slime.agent.trajectory`` is the ``TrajectoryManager`` one (#2005 on)."""
    return not hasattr(trajectory, "merge_turns") and hasattr(trajectory, "TrajectoryManager")


async def samples_of(
    trajectory: Any, sample: Any, row: Mapping[str, Any], result: Mapping[str, Any], tokenizer: Any
) -> Any:
    """What slime's trajectory code makes of ``result`` for ``sample``: the Sample, filled, on a
    ``merge_turns`` tree; the ``list[Sample]`` of ``get_trajectory`` on a ``TrajectoryManager`` one."""
    turns = results.turns_from_result(result)  # MalformedResultError without generation data
    truncated = results.status_of(result) == "truncated"
    if not uses_manager(trajectory):
        records = [trajectory.TurnRecord(**_turn_fields(turn), finish_reason="stop") for turn in turns]
        segment = trajectory.merge_turns(records)
        trajectory.write_segment_to_sample(sample, segment, result.get("reward"), tokenizer)
        if truncated:
            sample.status = type(sample).Status.TRUNCATED
        return sample
    adapter = importlib.import_module(OPENAI_ADAPTER_MODULE).OpenAIAdapter(tokenizer=tokenizer, sglang_url="")
    sid = sample.session_id
    adapter.open_session(sid)
    try:
        for at, (prompt, response, turn) in enumerate(_calls(adapter, row, result, turns)):
            last = at == len(turns) - 1
            record = trajectory.TurnRecord(
                **_turn_fields(turn), finish_reason="length" if last and truncated else "stop"
            )
            adapter.manager.record_turn(
                sid, turn=record, prompt_messages=prompt, response_message=response, metadata={"sid": sid}
            )
        made = await adapter.finish_session(sid, base_sample=sample, reward=result.get("reward"))
    finally:
        await adapter.drop_session(sid)  # cleanup only, idempotent: what slime's example does
    for each in made:
        if (each.metadata or {}).get("truncated"):
            each.status = type(each).Status.TRUNCATED
    return made


def _turn_fields(turn: Any) -> dict[str, Any]:
    return {
        "prompt_ids": turn.prompt_token_ids,
        "output_ids": turn.generation_token_ids,
        "output_log_probs": turn.generation_log_probs,
    }


def _calls(
    adapter: Any, row: Mapping[str, Any], result: Mapping[str, Any], turns: Sequence[Any]
) -> list[tuple[list[dict[str, Any]], dict[str, Any], Any]]:
    """Each model call's prompt messages and response message, as slime's ``OpenAIAdapter``
    translates them, with its turn: the chat messages NeMo Gym's model server renders the
    conversation into (the row's input, then the result's output items)."""
    request = row.get("responses_create_params")
    given = request.get("input", "") if isinstance(request, Mapping) else ""
    output = result["response"]["output"]
    chat = [*convert.input_to_messages(given), *convert.input_to_messages(output)]
    calls = [at for at, message in enumerate(chat) if message.get("generation_token_ids")]
    if len(calls) != len(turns):
        raise results.MalformedResultError(
            f"the result's output holds {len(turns)} model calls but folds into {len(calls)} assistant "
            "messages with token ids"
        )
    translated, _ = adapter._translate({"messages": convert.strip_token_fields(chat)})
    return [(translated[:at], translated[at], turn) for at, turn in zip(calls, turns, strict=True)]
