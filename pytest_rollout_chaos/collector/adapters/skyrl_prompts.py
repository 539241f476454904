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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pytest_rollout_chaos.collector.adapters import skyrl_env
from pytest_rollout_chaos.collector.protocol import Row, row_index

HOOK: Final = "_setup_env_extras"


def prompts_of(rows: Sequence[Row], size: int, extras: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One SkyRL prompt per group of ``size`` consecutive rows: the group's first row's messages,
    ``uid`` its ``_rowidx``, and ``extras`` with the group's rows in order (``skyrl_env.ROWS``);
    the row and session of repetition 0 are set too, what a generator without the hook uses."""
    prompts: list[dict[str, Any]] = []
    for start in range(0, len(rows), size):
        group = [dict(row) for row in rows[start : start + size]]
        uid = str(row_index(rows[start], start))
        prompts.append(
            {
                "prompt": messages_of(group[0]),
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
