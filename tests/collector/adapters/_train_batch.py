"""What ``train_batch_sound`` said of a scenario run by an adapter: whether its rows came from a
train batch the adapter read (``Rollout.in_train_batch`` set) or were only generated.

The invariant's PASS summary says ``(the rollouts not aborted)`` when no rollout said whether it
is in the train batch, which is what an adapter that stops at generation hands back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tests.catalog._verdicts import run_catalog

NOT_READ: Final = "(the rollouts not aborted)"


def train_batch_summary(tmp_path: Path, *, target: str, scenario: str, stack_args: Sequence[str]) -> str:
    """``train_batch_sound``'s summary of ``scenario`` run by ``target``; the run must pass it."""
    scratch = tmp_path / target.rpartition(":")[2]
    scratch.mkdir()
    report = scratch / "report.json"
    verdicts = run_catalog(
        scratch,
        target=target,
        scenarios=[scenario],
        stack_args=[*stack_args, f"--rollout-chaos-json={report}"],
    )
    assert verdicts[scenario].invariants.get("train_batch_sound") == "PASS", verdicts[scenario].message
    [record] = json.loads(report.read_text())["scenarios"]
    [judged] = [v for v in record["result"]["verdicts"] if v["name"] == "train_batch_sound"]
    return str(judged["summary"])
