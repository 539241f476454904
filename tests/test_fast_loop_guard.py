"""The fast-loop guard of ``tests/conftest.py``: it finds policy and Gym server starts in the logs
below a run's base directory, and lets Toxiproxy and test-made fakes be."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import full_stack_starts


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A folder outside the run's base temporary directory, which the guard itself watches."""
    with tempfile.TemporaryDirectory(prefix="guard-") as folder:
        yield Path(folder)


def _log(path: Path, command: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"--- 10:00:00 start: {command}\nlistening on http://127.0.0.1:1\n")


def test_policy_and_gym_starts_are_found_toxiproxy_and_fakes_are_not(run_dir: Path) -> None:
    python = sys.executable
    _log(run_dir / "a" / "policy.log", f"{python} -m pytest_rollout_chaos.servers.policy --model m")
    _log(run_dir / "b" / "gym_model.log", f"{python} -m pytest_rollout_chaos.servers.gym.model_server")
    _log(run_dir / "c" / "toxiproxy.log", f"{python} -m pytest_rollout_chaos.servers.toxiproxy -port 0")
    _log(run_dir / "d" / "policy.log", f"{run_dir}/d/venv/bin/vllm serve fixtures/tiny-llama")
    found = full_stack_starts(run_dir)
    assert [line.split(": ", 1)[0] for line in found] == [
        str(run_dir / "a" / "policy.log"),
        str(run_dir / "b" / "gym_model.log"),
    ]


def test_a_restart_line_further_down_a_log_counts_too(run_dir: Path) -> None:
    log = run_dir / "policy.log"
    log.write_text("some output\n--- 10:00:05 start: /opt/vllm/bin/vllm serve model --port 8000\n")
    assert full_stack_starts(run_dir) == [f"{log}: /opt/vllm/bin/vllm serve model --port 8000"]
