"""The prompts the ``skyrl`` adapter hands SkyRL's generator in place of the trainer's dataloader,
one per group of rows, and each sample's own row of its group through the generator's hook.

The workload lays each prompt's group out as ``n`` consecutive rows, equal but for
``_rowidx``. SkyRL gets one prompt per group (``uid`` = the group's first ``_rowidx``) and makes
the group itself: ``prepare_generator_input`` repeats the prompt ``n_samples_per_prompt`` times,
deep-copying its ``env_extras``, and gives each copy a ``TrajectoryID`` (the ``uid``, repetition
0..n-1); ``generate`` hands each ``agent_loop`` its own, in the same order as the rows. The
environment seeds its session from its row (``_rowidx``), which one prompt's extras cannot give
every sample, so the prompt's extras carry the whole group's rows and the generator is SkyRL's
``SkyRLGymGenerator`` with one hook filled in: ``_setup_env_extras`` (SkyRL's subclass hook,
a no-op upstream, called with the sample's ``TrajectoryID`` just before ``skyrl_gym.make``)
picks row ``repetition_id`` of the group and the session id ``agent_loop`` uses. On a tree
without the hook a workload of groups skips, saying so. The rows of a group differ only in
``_rowidx``, so the samples' environments behave alike; only the servers' records tell them apart.

A row's tools (``responses_create_params.tools``) go into its prompt as a system message:
SkyRL's generator templates the messages alone (``apply_chat_template`` without ``tools=``), and
a SkyRL dataset describes its tools in its prompts. The message says what the policy's own chat
template writes for those tools, so the first prompt is token for token what the model would
see with ``tools=`` (checked; a template that does not put tools in a system turn is an error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pytest_rollout_chaos.collector.adapters import skyrl_env
from pytest_rollout_chaos.collector.protocol import Row, row_index
from pytest_rollout_chaos.servers.gym.convert import tools_to_chat
from pytest_rollout_chaos.servers.gym.stack import MAX_OUTPUT_TOKENS

HOOK: Final = "_setup_env_extras"
_MARK: Final = "\x00rollout-chaos-system\x00"  # stands for the system message's text while rendering


def prompts_of(
    rows: Sequence[Row], size: int, extras: Mapping[str, Any], tokenizer: Any
) -> list[dict[str, Any]]:
    """One SkyRL prompt per group of ``size`` consecutive rows: the group's first row's messages
    (its tools in a system message, ``with_tools``), ``uid`` its ``_rowidx``, and ``extras`` with
    the group's rows in order (``skyrl_env.ROWS``); the row and session of repetition 0 are set
    too, what a generator without the hook uses."""
    prompts: list[dict[str, Any]] = []
    for start in range(0, len(rows), size):
        group = [dict(row) for row in rows[start : start + size]]
        uid = str(row_index(rows[start], start))
        params = group[0].get("responses_create_params")
        tools = tools_to_chat(params.get("tools")) if isinstance(params, dict) else []
        prompts.append(
            {
                "prompt": with_tools(messages_of(group[0]), tools, tokenizer),
                "env_class": skyrl_env.ENV_ID,
                "env_extras": {
                    **extras,
                    skyrl_env.ROWS: group,
                    skyrl_env.ROW: group[0],
                    skyrl_env.SESSION_ID: session_id(uid, 0),
                },
                "uid": uid,
            }
        )
    return prompts


_GENERATORS: dict[type, type] = {}


def generator_class(base: type) -> type:
    """SkyRL's ``SkyRLGymGenerator`` (``base``) with its ``_setup_env_extras`` hook filled in: each
    sample's extras get its own row of the group and ``agent_loop``'s session id (STOOD_IN)."""
    if not hasattr(base, HOOK):
        return base
    made = _GENERATORS.get(base)
    if made is None:

        def _setup_env_extras(
            self: Any, env_class: str, env_extras: dict[str, Any], sampling_params: Any, trajectory_id: Any
        ) -> dict[str, Any]:
            given = getattr(base, HOOK)(self, env_class, env_extras, sampling_params, trajectory_id)
            return sample_extras(given, trajectory_id)

        made = type(
            "RolloutChaosSkyRLGymGenerator", (base,), {HOOK: _setup_env_extras, "__module__": __name__}
        )
        _GENERATORS[base] = made
    return made


def sample_extras(extras: dict[str, Any], trajectory_id: Any) -> dict[str, Any]:
    """One sample's extras: row ``trajectory_id.repetition_id`` of its prompt's group
    (``skyrl_env.ROWS``) and the session id SkyRL's ``agent_loop`` gives that trajectory."""
    rows = extras.get(skyrl_env.ROWS)
    if rows is None:
        return extras
    if trajectory_id is None:
        raise ValueError(
            f"SkyRL handed {HOOK} no trajectory_id for a prompt of {len(rows)} rows; the adapter "
            "needs its repetition_id to give the sample its own row (prepare_generator_input sets it)"
        )
    repetition = int(trajectory_id.repetition_id)
    if not 0 <= repetition < len(rows):
        raise ValueError(
            f"trajectory {trajectory_id.instance_id}_{repetition}: repetition_id outside the group of "
            f"{len(rows)} rows (generator.n_samples_per_prompt differs from the workload's group size)"
        )
    return {
        **extras,
        skyrl_env.ROW: rows[repetition],
        skyrl_env.SESSION_ID: session_id(str(trajectory_id.instance_id), repetition),
    }


def session_id(uid: str, repetition: int) -> str:
    """The ``session_id`` SkyRL's ``agent_loop`` gives a trajectory: its ``TrajectoryID``
    (the prompt's ``uid``, the sample's ``repetition_id``) as ``instance_id_repetition_id``."""
    return f"{uid}_{repetition}"


def messages_of(row: Row) -> list[dict[str, Any]]:
    """The row's input as chat messages (SkyRL's ``prompt``)."""
    params = row.get("responses_create_params")
    given = params.get("input") if isinstance(params, dict) else None
    if isinstance(given, str):
        return [{"role": "user", "content": given}]
    if isinstance(given, list):
        return [
            {"role": str(item.get("role", "user")), "content": item.get("content", "")}
            for item in given
            if isinstance(item, dict)
        ]
    raise ValueError(f"row {row.get('_rowidx')!r} has no responses_create_params.input")


def with_tools(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], tokenizer: Any
) -> list[dict[str, Any]]:
    """``messages`` with ``tools`` described in their system message, in the text the tokenizer's
    chat template writes for them: rendered with ``tools=`` and with a marker system message, the
    two renderings differ only where the marker stands, and that text becomes the system message."""
    if not tools:
        return messages
    rest = messages[1:] if messages and messages[0].get("role") == "system" else messages
    wanted = _render(tokenizer, messages, tools=tools)
    marked = _render(tokenizer, [{"role": "system", "content": _MARK}, *rest])
    before, _, after = marked.partition(_MARK)
    made = [{"role": "system", "content": wanted[len(before) : len(wanted) - len(after)]}, *rest]
    if not (wanted.startswith(before) and wanted.endswith(after)) or _render(tokenizer, made) != wanted:
        raise ValueError(
            "the policy's chat template does not write a row's tools into a system message, so the "
            "skyrl adapter cannot hand them to SkyRL's generator (which templates messages without "
            f"tools=) as a SkyRL dataset would, in its prompt; rendered with tools: {wanted!r}"
        )
    return made


def _render(tokenizer: Any, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
    return str(text)


def generation_limit(rows: Sequence[Row]) -> int:
    """SkyRL's ``max_generate_length`` (one per batch): the rows' ``max_output_tokens``, else what
    the stack's model server gives a call without one, so each generation gets the budget it would
    get through NeMo Gym; rows that differ are an error (SkyRL cannot give each its own)."""
    limits = set()
    for position, row in enumerate(rows):
        params = row.get("responses_create_params")
        given = params.get("max_output_tokens") if isinstance(params, dict) else None
        if given is not None and not (isinstance(given, int) and given > 0):
            raise ValueError(
                f"row {row_index(row, position)}: max_output_tokens {given!r} is no positive integer"
            )
        limits.add(given or MAX_OUTPUT_TOKENS)
    if len(limits) > 1:
        raise ValueError(
            f"the rows set different max_output_tokens ({sorted(limits)}); SkyRL's generator has one "
            "generator.sampling_params.max_generate_length per batch"
        )
    return limits.pop() if limits else MAX_OUTPUT_TOKENS
