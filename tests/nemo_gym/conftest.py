"""Cross-checks against real NeMo Gym: skipped, with the reason, where no interpreter has it.

The interpreter comes from ``--rollout-chaos-gym-python``, ``ROLLOUT_CHAOS_GYM_PYTHON`` or the
current one (``servers.nemo_gym.locate``). CI builds one per tested version in its
cache (``venv-nemo-gym-<version>``, ``.ci/run``).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_rollout_chaos.servers.nemo_gym.locate import GymPython, NemoGymMissingError, locate
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.settings import ChaosSettings

PROGRAMS = Path(__file__).parent / "programs"


@pytest.fixture(scope="session")
def gym_python(chaos_settings: ChaosSettings) -> GymPython:
    """The NeMo Gym interpreter, or a skip that says how to get one."""
    try:
        return locate(chaos_settings.gym_python)
    except NemoGymMissingError as error:
        pytest.skip(f"real NeMo Gym is not available: {error}")


@contextlib.contextmanager
def started(log_dir: Path) -> Iterator[Any]:
    """A ``start(spec)`` callback whose processes are all stopped when the block ends."""
    with contextlib.ExitStack() as stack:

        def start(spec: ServerSpec) -> ManagedProcess:
            process = ManagedProcess(spec, log_dir)
            stack.callback(process.stop)
            process.start()
            return process

        yield start


def run_program(python: GymPython, name: str, request: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
    """Run ``programs/<name>`` under the NeMo Gym interpreter; its last stdout line is the JSON answer."""
    done = subprocess.run(
        (str(python.path), str(PROGRAMS / name)),
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"{name} exited {done.returncode}\nstderr:\n{done.stderr[-4000:]}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    answer = json.loads(lines[-1])
    assert isinstance(answer, dict)
    return answer
