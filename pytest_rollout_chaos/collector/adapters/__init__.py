"""Adapters: collectors that drive a trainer's real rollout code, one module each, named in
``targets.ADAPTERS`` (``skyrl_skip_failed_rollouts`` is ``skyrl`` with SkyRL's
``generator.skip_failed_rollouts`` on).

Each adapter module holds a ``factory(ctx) -> Collector`` and a module-level ``UPSTREAM``
(an ``upstream.Upstream``: the trainer's modules it imports and how to install them). Importing an
adapter module imports nothing of the trainer; ``load`` checks the trainer imports, once, at
session start, so a missing trainer is one usage error rather than a traceback per scenario.
"""

from __future__ import annotations

import importlib

from pytest_rollout_chaos import targets
from pytest_rollout_chaos.collector.protocol import CollectorFactory


def load(name: str) -> CollectorFactory:
    """The factory of adapter ``name``; ``CollectorTargetError`` when its trainer cannot be imported."""
    module = importlib.import_module(f"{__name__}.{name}")
    module.UPSTREAM.require()
    factory: CollectorFactory = module.factory
    return factory


def gym_client(target: str, nemo_gym: str | None = None, *, probed: bool = False) -> str:
    """What plays NeMo Gym's client for ``target``: a built-in adapter declares it (``GYM_CLIENT``,
    or ``gym_client(nemo_gym)`` where that depends on the NeMo Gym installed: the version ``probed``
    in the interpreter the target runs in, None for none; this interpreter's unless ``probed``), the
    reference collector has the harness's ``GymClient``; a user's own collector is its business."""
    if target == targets.REFERENCE:
        return "stand-in: the harness's GymClient (ctx.gym), NeMo Gym 0.4's transport"
    if not targets.is_adapter(target):
        return "the collector's own (not known to the gate)"
    module = importlib.import_module(f"{__name__}.{target}")
    depends = getattr(module, "gym_client", None)
    if callable(depends):
        from pytest_rollout_chaos.collector.adapters import own_gym

        return str(depends(nemo_gym if probed else own_gym.version()))
    declared = getattr(module, "GYM_CLIENT", "")
    return str(declared) or "not declared by the adapter"
