"""What the hosts of ``hosts:N`` read from this machine's disk, and which of it they cannot see.

A host's mount namespace has fresh tmpfs mounts over ``/tmp`` and ``/dev/shm``
(``netns.PRIVATE_MOUNTS``), so what lives there on this machine is not there on a host: an
interpreter in a virtualenv under ``/tmp``, a checkout cloned there, a model copied there. The
Ray node, its workers and the servers on the host would then fail as they start, far from the
cause (a ``ray start`` that never says it runs, an import error in a worker's log). ``preflight``
asks ``hidden(needed(settings))`` before any host exists and stops the run with one usage error.

What the hosts read: the interpreter (``ray start``, Ray's workers and our servers run
``sys.executable``) and its installation, the folder this package is imported from (the
workers import it; the datasets live beside it), every ``PYTHONPATH`` entry (the hosts' processes
inherit it), and what the settings send there: the model the policy loads, the interpreters that
run vLLM and NeMo Gym, the trainer tree an adapter's Ray actor imports. What only pytest reads may
live anywhere: the scenario files, the rootdir and its conftest files, the collector under test.
Ray puts pytest's working directory on its workers' ``sys.path`` too, but nothing is imported
from there that the package's folder and ``PYTHONPATH`` do not already name.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.ray.netns import PRIVATE_MOUNTS
from pytest_rollout_chaos.settings import ChaosSettings


@dataclass(frozen=True, slots=True)
class NeededPath:
    """A path the hosts read, and what it is (``--rollout-chaos-model``, ``the interpreter``)."""

    what: str
    path: Path


@dataclass(frozen=True, slots=True)
class HiddenPath:
    """A needed path a host cannot see: under ``mount`` as written, or once its links lead (``real``)."""

    needed: NeededPath
    mount: Path
    real: Path | None = None  # where its links lead, when only that is under ``mount``

    def describe(self) -> str:
        what, path = self.needed.what, self.needed.path
        named = f"{what}={path}" if what.startswith(("--", "$")) else f"{what} {path}"
        if self.real is not None:
            return f"{named} is a link to {self.real}, which is under {self.mount}"
        return f"{named} is under {self.mount}"


def interpreter_paths() -> list[NeededPath]:
    """What every run on the hosts reads: the interpreter, its installation, this package, ``PYTHONPATH``."""
    found = [
        NeededPath("the interpreter", Path(sys.executable)),
        NeededPath("its installation (sys.prefix)", Path(sys.prefix)),
        NeededPath("its base installation (sys.base_prefix)", Path(sys.base_prefix)),
        NeededPath("the folder pytest_rollout_chaos is imported from", bundled.import_root()),
    ]
    spec = importlib.util.find_spec("ray")
    if spec is not None and spec.origin is not None:
        found.append(NeededPath("Ray's package", Path(spec.origin).parent))
    entries = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    found.extend(NeededPath("the PYTHONPATH entry", Path(entry)) for entry in entries)
    return found


def needed(settings: ChaosSettings) -> list[NeededPath]:
    """Every path the hosts of a run with ``settings`` read from this machine (module docstring)."""
    from pytest_rollout_chaos.servers.nemo_gym.locate import GYM_PYTHON_ENV
    from pytest_rollout_chaos.servers.policy.vllm import VLLM_PYTHON_ENV

    found = interpreter_paths()
    if settings.policy_url is None:
        found.append(NeededPath("--rollout-chaos-model", settings.model))
        if settings.backend == "vllm":
            found.extend(_interpreter("--rollout-chaos-vllm-python", settings.vllm_python, VLLM_PYTHON_ENV))
    if settings.gym == "nemo-gym":
        found.extend(_interpreter("--rollout-chaos-gym-python", settings.gym_python, GYM_PYTHON_ENV))
    if settings.upstream is not None:
        found.append(NeededPath("--rollout-chaos-upstream", settings.upstream))
    return found


def hidden(paths: Iterable[NeededPath], mounts: Sequence[Path] = PRIVATE_MOUNTS) -> list[HiddenPath]:
    """The ``paths`` a host cannot see: under one of ``mounts`` as written or once links are followed;
    each path once."""
    found: dict[Path, HiddenPath] = {}
    for needed_path in paths:
        written, real = _absolute(needed_path.path), needed_path.path.resolve()
        if written in found:
            continue
        for mount in mounts:
            if _under(written, mount):
                found[written] = HiddenPath(needed_path, mount)
                break
            if _under(real, mount) or _under(real, mount.resolve()):
                found[written] = HiddenPath(needed_path, mount, real)
                break
    return list(found.values())


def _interpreter(option: str, configured: Path | None, env: str) -> list[NeededPath]:
    """The interpreter an option or its environment variable names (else ``sys.executable``: listed)."""
    if configured is not None:
        return [NeededPath(option, configured)]
    from_env = os.environ.get(env, "").strip()
    return [NeededPath(f"${env}", Path(from_env))] if from_env else []


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _under(path: Path, mount: Path) -> bool:
    return path == mount or mount in path.parents
