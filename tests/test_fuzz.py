"""``--rollout-chaos-fuzz``: drawn variants find bugs the catalog's own workloads hide, shrink them, and
write a scenario file that fails again on its own; the reference collector passes the same draws.

The draws are fixed by the seed (``tests/scenario/test_draw.py`` checks how draws are made; here
they are run). Draw 2 of each: ``baseline`` under seed 7 has 20 rows, a slower environment and a
second collection; ``native-train-nan-logprobs`` under seed 1 a 50 ms environment and three
collections; ``one-row-hangs`` under seed 2 a concurrency limit of one and a slower environment;
``agent-oom-killed`` under seed 371 a concurrency limit of one, the kill one request sooner and a
second collection: the collection fails as it must, and with a permit kept by each row it cut, the
next step waits for permits nobody gives back. Only the last needs more than one collection; the
others shrink theirs away. Draw 1 of each shows none of the four bugs.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from tests.catalog._verdicts import run_catalog

pytestmark = pytest.mark.slow  # child pytest runs with the whole stack

BUFFER = "fixtures.collectors.rollout_buffer_sixteen:factory"
DEADLINE = "fixtures.collectors.env_deadline_from_dev_box:factory"
QUEUED = "fixtures.collectors.deadline_from_collect_start:factory"
LEAKED = "fixtures.collectors.permit_leaked_on_failure:factory"


def _fuzz_args(out: Path, *, seed: int) -> list[str]:
    return ["--rollout-chaos-fuzz=2", f"--rollout-chaos-seed={seed}", f"--rollout-chaos-fuzz-dir={out}"]


class Case(NamedTuple):
    target: str
    scenario: str
    seed: int
    kept: tuple[str, ...]  # the edits besides the seed that the shrunk draw keeps


@pytest.mark.parametrize(
    "case",
    [
        Case(BUFFER, "baseline", 7, ("workload.rows_per_task",)),
        Case(DEADLINE, "native-train-nan-logprobs", 1, ("stack.env_latency_ms_per_call",)),
        Case(QUEUED, "one-row-hangs", 2, ("workload.max_concurrency",)),  # a limit of one
        Case(LEAKED, "agent-oom-killed", 371, ("workload.max_concurrency", "workload.collections")),
    ],
    ids=["rollout-buffer", "env-deadline", "deadline-from-collect-start", "permit-leaked-on-failure"],
)
def test_a_draw_finds_the_bug_the_scenario_hides_and_its_shrunk_file_fails_again(
    tmp_path: Path, case: Case
) -> None:
    target, scenario, seed, kept = case
    out = tmp_path / "fuzz"
    args = _fuzz_args(out, seed=seed)
    verdicts = run_catalog(tmp_path, target=target, scenarios=[scenario], stack_args=args)
    assert verdicts[scenario].passed, f"{scenario} itself catches {target}: {verdicts[scenario].message}"
    assert verdicts[f"{scenario}-fuzz-1"].passed, verdicts[f"{scenario}-fuzz-1"].message
    found = verdicts[f"{scenario}-fuzz-2"]
    assert found.skipped is None, found.skipped
    assert not found.passed, f"draw 2 did not find {target}"
    written = out / f"{scenario}-fuzz-2.chaos.yaml"
    assert f"written to {written}; run it again: pytest --rollout-chaos {written}" in found.message
    assert "shrunk in" in found.message, found.message  # each draw has an edit its bug does not need
    header = [line for line in written.read_text().splitlines() if line.startswith("#   ")]
    assert [line.split(":")[0].strip("# ") for line in header] == ["stack.policy.seed", *kept], header
    assert yaml.safe_load(written.read_text())["name"] == f"{scenario}-fuzz-2"
    (tmp_path / "again").mkdir()
    again = run_catalog(tmp_path / "again", target=target, files=[written])
    assert not again[f"{scenario}-fuzz-2"].passed, "the written draw passes when run on its own"


@pytest.mark.parametrize(
    ("scenario", "seed"),
    [("baseline", 7), ("native-train-nan-logprobs", 1), ("one-row-hangs", 2), ("agent-oom-killed", 371)],
)
def test_the_reference_collector_passes_the_same_draws(tmp_path: Path, scenario: str, seed: int) -> None:
    args = _fuzz_args(tmp_path / "fuzz", seed=seed)
    verdicts = run_catalog(tmp_path, target="reference", scenarios=[scenario], stack_args=args)
    assert set(verdicts) == {scenario, f"{scenario}-fuzz-1", f"{scenario}-fuzz-2"}
    assert all(result.passed for result in verdicts.values()), {
        name: result.message for name, result in verdicts.items() if not result.passed
    }
    assert not (tmp_path / "fuzz").exists()
