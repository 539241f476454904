"""``rollout-chaos run``: the same scenarios give the same verdicts as ``pytest --rollout-chaos``, with
no pytest around the engine, and bad input is one usage error before anything starts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_rollout_chaos import cli
from pytest_rollout_chaos.servers.keeper import STARTING_LINE

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = [
    REPO / "scenarios" / f"{name}.chaos.yaml"
    for name in ("baseline", "short-results", "validation-batched-env")
]
TRAIN_ONLY = '''
from fixtures.collectors.silent_short_count import factory as _silent


class TrainOnly:
    """The silent short count, declaring train mode only: the validation scenario cannot run."""

    modes = ("train",)

    def __init__(self, ctx):
        self._inner = _silent(ctx)

    async def collect(self, rows, *, mode):
        return await self._inner.collect(rows, mode=mode)


factory = TrainOnly
'''


def _verdicts(document: dict[str, Any]) -> dict[str, tuple[str, dict[str, str]]]:
    """Each scenario's outcome and its invariants' statuses."""
    return {
        entry["name"]: (
            entry["outcome"],
            {v["name"]: v["status"] for v in (entry.get("result") or {}).get("verdicts", [])},
        )
        for entry in document["scenarios"]
    }


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *arguments], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.slow
def test_run_gives_the_verdicts_pytest_gives(tmp_path: Path) -> None:
    collector = tmp_path / "train_only.py"
    collector.write_text(TRAIN_ONLY)
    target = f"{collector}:factory"
    outside = _run(
        "-m", "pytest_rollout_chaos.cli", "run", *map(str, SCENARIOS), "--target", target,
        "--json", str(tmp_path / "run.json"),
    )  # fmt: skip
    assert outside.returncode == 1, outside.stdout + outside.stderr
    inside = _run(
        "-m", "pytest", "-p", "no:cacheprovider", "--rollout-chaos", f"--rollout-chaos-target={target}",
        f"--rollout-chaos-json={tmp_path / 'pytest.json'}", *map(str, SCENARIOS),
    )  # fmt: skip
    assert inside.returncode == 1, inside.stdout + inside.stderr
    ran = _verdicts(json.loads((tmp_path / "run.json").read_text()))
    assert ran == _verdicts(json.loads((tmp_path / "pytest.json").read_text()))
    assert ran["baseline"][0] == "passed"
    assert ran["short-results"][0] == "failed"
    assert ran["short-results"][1]["no_silent_short_count"] == "FAIL"
    assert ran["validation-batched-env"] == ("skipped", {})
    assert "validation-mode scenario; the collector under test supports only train mode" in outside.stdout
    assert "FAIL   short-results" in outside.stdout


@pytest.mark.slow
def test_run_says_on_stderr_as_each_server_becomes_ready() -> None:
    """The lines pytest's terminal shows while the stack starts, from the same keeper; stdout keeps
    only the summary."""
    result = _run("-m", "pytest_rollout_chaos.cli", "run", str(SCENARIOS[0]))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert lines.count(STARTING_LINE) == 1
    ready = [line for line in lines if re.fullmatch(r"rollout-chaos: \w+ ready in \d+\.\ds", line)]
    assert {"policy", "toxiproxy", "gym_head"} <= {line.split()[1] for line in ready}
    assert lines.index(STARTING_LINE) < lines.index(ready[0]) < lines.index("[1/1] baseline PASSED")
    assert "rollout-chaos:" not in result.stdout


def test_a_bad_target_or_file_is_one_usage_error_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["run", str(SCENARIOS[0]), "--target", "no-colon"]) == 2
    assert (
        "rollout-chaos run: --target: target 'no-colon' is not valid (valid: reference"
        in capsys.readouterr().err
    )
    broken = tmp_path / "broken.chaos.yaml"
    broken.write_text("name: broken\ndescription: d\nexpect:\n  invariants: [no_such_invariant]\n")
    assert cli.main(["run", str(broken)]) == 2
    assert f"{broken}:4: expect.invariants" in capsys.readouterr().err
    assert cli.main(["run", str(tmp_path / "missing.chaos.yaml")]) == 2
    assert "missing.chaos.yaml: no such file or folder" in capsys.readouterr().err
