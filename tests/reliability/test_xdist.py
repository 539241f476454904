"""The suite runs under ``pytest -n 2``: two workers, each with its own servers, and no port collision.

A small subset runs in a subprocess under pytest-xdist: this directory's loopback module,
whose tests need the session stack, so each worker starts a whole stack (policy, Toxiproxy
with a proxy per link, the Gym servers) at the same time as the other. Both workers must run
tests, and everything must pass: ports come from the OS in every server, never guessed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the whole stack in two xdist workers

REPO = Path(__file__).resolve().parents[2]
SUBSET = ("tests/reliability/test_loopback.py",)
TIMEOUT_S = 180.0


def test_subset_passes_under_two_xdist_workers() -> None:
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "load",
            "-p",
            "no:cacheprovider",
            "-v",
            *SUBSET,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    output = finished.stdout + finished.stderr
    tail = "\n".join(output.splitlines()[-40:])
    assert finished.returncode == 0, f"pytest -n 2 exited {finished.returncode}:\n{tail}"
    workers = set(re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED", output))
    assert workers == {"gw0", "gw1"}, f"expected both workers to pass tests, saw {sorted(workers)}:\n{tail}"
    assert not re.search(r"\b(FAILED|ERROR)\b", output), tail
