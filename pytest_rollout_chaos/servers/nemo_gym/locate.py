"""Find the interpreter that runs real NeMo Gym servers, or say exactly what to install.

NeMo Gym pulls Ray and needs a newer Python than this package (0.4.0: Python 3.12; 0.5.0 and
later declare Python >= 3.13.14), so it usually lives in a virtual environment of its own, not
in the one pytest runs in. The interpreter is chosen in this order: the
``--rollout-chaos-gym-python`` option (or its ini twin), the ``ROLLOUT_CHAOS_GYM_PYTHON``
environment variable, then the current interpreter if it can import ``nemo_gym``.

Any installed version is used; what differs between versions is detected from the wheel
itself (``GymPython.environment_relay``), never from the version number. ``TESTED_VERSIONS``
are the ones this project's CI runs.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.errors import ServerStartError

GYM_PYTHON_ENV: Final = "ROLLOUT_CHAOS_GYM_PYTHON"
TESTED_VERSIONS: Final = ("0.4.0", "0.7.0")
PROBE_TIMEOUT_S: Final = 60.0
INSTALL_HINT: Final = (
    "Install it into a virtual environment of its own, either NeMo Gym 0.4.0 on Python 3.12 "
    "(python3.12 -m venv V && V/bin/pip install nemo-gym==0.4.0) or NeMo Gym 0.7.0 on Python 3.13 "
    "(python3.13 -m venv V && V/bin/pip install --ignore-requires-python nemo-gym==0.7.0; it declares "
    "Python >= 3.13.14), then pass --rollout-chaos-gym-python=V/bin/python "
    f"(or set {GYM_PYTHON_ENV}=V/bin/python)"
)
# Prints the version, the Python version, and 1 if the wheel ships the legacy_agent environment
# server (the relay through which RolloutCollectionHelper reaches agents since 0.5), else 0.
_PROBE: Final = "\n".join(
    (
        "import importlib.util, os, sys, nemo_gym.package_info as p",
        "spec = importlib.util.find_spec('environment_servers')",
        "roots = list(spec.submodule_search_locations or ()) if spec else []",
        "relay = any(os.path.isfile(os.path.join(r, 'legacy_agent', 'app.py')) for r in roots)",
        "print(p.__version__); print(sys.version.split()[0]); print(int(relay))",
    )
)


class NemoGymMissingError(ServerStartError):
    """No usable interpreter with ``nemo_gym``: says which ones were tried and what to install."""


@dataclass(frozen=True, slots=True)
class GymPython:
    """An interpreter that imports ``nemo_gym``, with the versions and features it reported."""

    path: Path
    nemo_gym_version: str
    python_version: str
    # The wheel has environment_servers/legacy_agent: its rollout collection reaches each agent
    # through an environment server relaying /run, so the backend puts one in front of each agent.
    environment_relay: bool = False

    @property
    def tested(self) -> bool:
        """Whether this NeMo Gym version is one the project's CI runs."""
        return self.nemo_gym_version in TESTED_VERSIONS

    def describe(self) -> str:
        """One line for the terminal summary."""
        untested = "" if self.tested else f"; untested, CI runs {', '.join(TESTED_VERSIONS)}"
        relay = ", agents behind legacy_agent environment servers" if self.environment_relay else ""
        return (
            f"nemo_gym {self.nemo_gym_version} on Python {self.python_version} ({self.path}{relay}{untested})"
        )


def locate(configured: Path | None = None) -> GymPython:
    """The interpreter to run NeMo Gym servers with; ``NemoGymMissingError`` when there is none.

    An explicitly configured interpreter (option or environment) must work: it is never
    silently replaced by another one.
    """
    from_env = os.environ.get(GYM_PYTHON_ENV, "").strip()
    if configured is not None:
        return _require(configured, "--rollout-chaos-gym-python")
    if from_env:
        return _require(Path(from_env), f"environment variable {GYM_PYTHON_ENV}")
    found, _why = probe(Path(sys.executable))
    if found is not None:
        return found
    raise NemoGymMissingError(
        "real NeMo Gym needs an interpreter that can import nemo_gym; none was configured "
        f"and the current one ({sys.executable}) cannot import it. {INSTALL_HINT}"
    )


def _require(path: Path, source: str) -> GymPython:
    found, why = probe(path)
    if found is None:
        raise NemoGymMissingError(f"{source}: {str(path)!r} cannot run NeMo Gym: {why}. {INSTALL_HINT}")
    return found


@functools.cache
def probe(path: Path) -> tuple[GymPython | None, str]:
    """``(GymPython, "")`` if ``path`` imports ``nemo_gym``, else ``(None, why not)``."""
    if not path.exists():
        return None, "no such file"
    try:
        done = subprocess.run(
            (str(path), "-c", _PROBE),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"could not run it ({error})"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"'import nemo_gym' failed ({last})"
    lines = done.stdout.split()
    if len(lines) < 3 or lines[2] not in ("0", "1"):
        return None, f"unexpected answer to the version probe: {done.stdout!r}"
    return GymPython(path, lines[0], lines[1], environment_relay=lines[2] == "1"), ""
