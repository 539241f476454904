"""The built-in collectors, by the names ``--rollout-chaos-target`` takes: the one list of them.

The option check, the help texts, the gate, the scenario format's ``trainer_config`` keys and the
adapters' loader all read it, so a new adapter is its module in ``collector/adapters/`` plus one
line in ``ADAPTERS``. Each trainer's interpreter may be named by an environment variable
(``python_env``), which the gate and the adapters' tests read alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

REFERENCE: Final = "reference"
"""The harness's own collector (``collector/reference.py``)."""
NEMO_GYM: Final = "nemo_gym"
"""NeMo Gym's own rollout collection (``ng_collect_rollouts``' path), run in NeMo Gym's interpreter."""

ADAPTERS: Final[Mapping[str, str]] = MappingProxyType(
    {
        # adapter (its module in collector/adapters/): the trainer whose code it drives
        "nemo_rl": "nemo_rl",
        "slime": "slime",
        "verl": "verl",
        "skyrl": "skyrl",
        "skyrl_skip_failed_rollouts": "skyrl",  # skyrl with generator.skip_failed_rollouts on
        NEMO_GYM: "nemo_gym",  # in an interpreter of its own (--rollout-chaos-gym-python)
    }
)

TRAINERS: Final = tuple(dict.fromkeys(ADAPTERS.values()))
"""The trainers a ``workload.trainer_config`` key may name (its first part)."""

BUILTIN: Final = (REFERENCE, *ADAPTERS)

FACTORY_EXAMPLE: Final = "MODULE:FACTORY such as 'my_trainer.chaos:make_collector'"


def valid_targets() -> str:
    """What a target may be, for an error's ``(valid: ...)`` and a help text."""
    return f"{', '.join(BUILTIN)}, or {FACTORY_EXAMPLE}"


def is_adapter(target: str) -> bool:
    return target in ADAPTERS


def is_builtin(target: str) -> bool:
    return target in BUILTIN


def python_env(target: str) -> str | None:
    """The environment variable naming the interpreter of ``target``'s trainer
    (``ROLLOUT_CHAOS_NEMO_RL_PYTHON`` for ``nemo_rl``); None for a target that is no trainer's
    adapter. ``nemo_gym`` has none: the gate runs it on its own interpreter, and the collection
    runs in NeMo Gym's (``--rollout-chaos-gym-python``)."""
    trainer = ADAPTERS.get(target)
    return None if trainer in (None, NEMO_GYM) else f"ROLLOUT_CHAOS_{trainer.upper()}_PYTHON"
