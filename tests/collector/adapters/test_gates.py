"""The gates the adapters exist for, run as a user runs them: ``rollout-chaos gate`` over the pinned
base and head trees, same seed.

Each pair's PR fixes one upstream bug; the gate must show that scenario red on base and green on
head, by the invariant named here (or, where the trainer still breaks, red on both with the
trainer's own error), and pin every other verdict change the PR makes (measured over
the whole catalog; ``ROLLOUT_CHAOS_GATE_SCOPE=catalog`` runs it all again, CI runs the scenarios
that move and a few that do not). slime's PR #2078 does not fix its target once slime is driven to
its train data: the raising trajectory becomes a one-element ``list[Sample]`` among plain Samples,
and ``RolloutManager``'s metrics read ``effective_response_length`` on it (``AttributeError`` in
``slime/ray/rollout.py``), so the step still goes down, on head as on base, in the four scenarios
the isolation turned green before; the gate says so (``expected fixed, but on head it failed``,
with slime's frame). Whole-batch failures become train batches of aborted placeholders (five
scenarios turn red: regressions the gate reports, exit 1). SkyRL's PR #1986 is gated twice: with
its flag off (the default) no verdict moves; with it on (``--head-target
skyrl_skip_failed_rollouts``: the base tree has no such setting) the four scenarios in which
single rollouts raise where SkyRL's loop goes (the verifier, the policy, the environment's init)
turn green, and nothing turns red (a batch whose every rollout failed still raises, so no empty
epoch is handed on).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_rollout_chaos import cli, targets
from pytest_rollout_chaos.gate.compare import UNCHANGED
from pytest_rollout_chaos.gate.environment import python_fit
from pytest_rollout_chaos.scenario.model import load_scenario
from tests.catalog._verdicts import CATALOG
from tests.collector.adapters import _nemo_rl_trees, _nemo_rl_val_trees, _skyrl_trees
from tests.collector.adapters._trees import (
    REPO,
    archived_requires_python,
    missing_modules,
    upstream_dir,
    wrong_python,
)

pytestmark = [
    pytest.mark.slow,  # each gate is two catalog runs over real trainer code
    pytest.mark.usefixtures("gate_scratch_in_tmp_path"),  # a failed gate's trees not left in /tmp
]
RUNS = ("--runs", "2")


@dataclass(frozen=True)
class Pair:
    target: str
    base: str
    head: str
    fixes: str
    by: str  # the invariant that is red on base and green on head (red on both: ``still_raises``)
    fixed: frozenset[str]
    regressions: frozenset[str]
    needs: tuple[str, ...]
    controls: frozenset[str]  # scenarios the PR leaves alone, run beside the moving ones
    by_chance: frozenset[str] = frozenset()  # fixed in a run or not, as the fault's draws fall
    head_target: str | None = None  # the head side's target, when the PR adds the setting it turns on
    python: tuple[int, int] = (3, 11)  # the oldest Python the trainer runs on (beside requires-python)
    still_raises: str = ""  # where the PR does not fix ``fixes``: what head's message must show
    fails_alone: bool = False  # ``by`` is the only invariant red (or unknown) on base, none on head
    base_says: tuple[str, ...] = ()  # what base's story of ``fixes`` must say


def _validation_scenarios() -> frozenset[str]:
    """The catalog's validation-mode scenarios, by name."""
    loaded = map(load_scenario, CATALOG.glob("*.chaos.yaml"))
    return frozenset(scenario.name for scenario in loaded if scenario.workload.mode == "validation")


PAIRS = {
    "slime#2078": Pair(
        target="slime",
        base="slime-fec3da9b",
        head="slime-1bc255ed",
        fixes="trajectory-exception-isolated",
        by="isolated_failures",
        # One raising trajectory (an HTTP 500, malformed JSON, NaN retries given up, a 503) still
        # takes the step down on head: generate_and_rm_group isolates it into a one-element
        # list[Sample], and RolloutManager.generate -> _log_rollout_data ->
        # compute_metrics_from_samples reads sample.effective_response_length on that list
        # (AttributeError; TypeError in _get_rollout_data's flattening when it is the first row).
        still_raises="AttributeError: 'list' object has no attribute 'effective_response_length' "
        "(at slime/ray/rollout.py:",
        fixed=frozenset(),
        # Where the whole batch fails (a dead link, a server gone) every row is a placeholder, the
        # lists flatten away, and slime trains on them where the base raised: an empty epoch
        # (no_empty_epoch) and placeholders in the train batch (train_batch_sound). short-results
        # loses row 0's result: its placeholder list is data[0], so the flattening raises
        # TypeError ('Sample' object is not iterable), which names no short count.
        regressions=frozenset(
            {
                "resources-down",
                "short-results",
                "model-link-reset",
                "resources-exit-zero",
                "truncated-run-response",
            }
        ),
        needs=("numpy", "aiohttp", "httpx", "pybase64", "pylatexenc", "sympy"),
        controls=frozenset({"baseline", "nan-logprobs-nan"}),
        by_chance=frozenset({"policy-503-storm"}),  # its 503s fall on requests at random: when
        # none hits a row on base and one does on head, it is a regression
    ),
    "skyrl#1986": Pair(
        target="skyrl",
        head_target="skyrl_skip_failed_rollouts",
        base="skyrl-1ec7fae4",
        head="skyrl-caf4ce6f",
        fixes="verifier-exception-isolated",
        by="isolated_failures",
        # One rollout's exception (the verifier's 500, a policy 503, its environment's init failing
        # where the catalog fails an agent's /run, in one step or before the next) no longer aborts
        # the step: _rollout_or_marker turns it into a FailedRollout, _substitute_failed_rollouts
        # into a placeholder. In a group the placeholder stays (groups_intact): failed on both.
        # A hung environment request or 30 unparsable generate answers become placeholders whose
        # cause SkyRL logs without the deadline or the fault (root_cause_visible): failed on both.
        # The scenarios whose faults have no counterpart in SkyRL's loop (the agents' processes,
        # the model server, the Gym client) skip on both sides, so they cannot move.
        fixed=frozenset(
            {
                "verifier-exception-isolated",
                "policy-503-storm",
                "trajectory-exception-isolated",
                "next-step-after-failed-rows",
            }
        ),
        regressions=frozenset(),
        needs=_skyrl_trees.SKYRL_DEPENDENCIES,
        controls=frozenset({"baseline", "workload-out-of-order"}),
        by_chance=frozenset({"policy-503-storm"}),  # its 503s fall on requests at random
        python=_skyrl_trees.PYTHON,
    ),
    "nemo_rl#2394": Pair(
        target="nemo_rl",
        base="nemo-rl-3eebe4da",
        head="nemo-rl-964b609a",
        fixes="short-results",
        by="no_silent_short_count",
        fixed=frozenset({"short-results"}),
        regressions=frozenset(),
        needs=_nemo_rl_trees.TRAINER_MODULES + _nemo_rl_val_trees.VALIDATE_MODULES,
        controls=frozenset({"baseline", "resources-down", "trajectory-exception-isolated"}),
    ),
    "nemo_rl#2209": Pair(
        target="nemo_rl",
        base="nemo-rl-3069f281",
        head="nemo-rl-c6a661e8",
        fixes="validation-batched-env",
        by="batched_env_eval",
        fixed=frozenset({"validation-batched-env"}),
        regressions=frozenset(),
        needs=_nemo_rl_trees.TRAINER_MODULES + _nemo_rl_val_trees.VALIDATE_MODULES,
        # every other validation-mode scenario keeps its verdict (validate() is what the PR changes)
        controls=frozenset({"baseline", "short-results"}) | _validation_scenarios(),
        # validate() steps the environment once per sample per turn before the PR
        fails_alone=True,
        base_says=("per-sample env evaluation in validation",),
    ),
}


def _archives(pair: Pair) -> tuple[Path, Path]:
    """The pair's tarballs; skip where they are absent, or this is not the trainer's interpreter
    (the one the gate runs both sides on here: ``wrong_python``), or it lacks a module."""
    if sys.version_info < pair.python:
        pytest.skip(f"{pair.target} needs Python {pair.python[0]}.{pair.python[1]}")
    archives = tuple(upstream_dir() / f"{name}.tar.gz" for name in (pair.base, pair.head))
    absent = [archive.name for archive in archives if not archive.is_file()]
    if absent:
        pytest.skip(
            f"no {', '.join(absent)} in {upstream_dir()} (ROLLOUT_CHAOS_UPSTREAM_DIR names another folder)"
        )
    for name, archive in zip((pair.base, pair.head), archives, strict=True):
        why = wrong_python(targets.ADAPTERS[pair.target], name, archived_requires_python(archive))
        if why is not None:
            pytest.skip(why)
    missing = missing_modules(pair.needs)
    if missing:
        pytest.skip(f"{pair.target}'s dependencies are not installed here (missing: {', '.join(missing)})")
    return archives[0], archives[1]


def _scenarios(pair: Pair) -> list[str]:
    """The scenarios the PR moves and its controls; none (the whole catalog) with
    ``ROLLOUT_CHAOS_GATE_SCOPE=catalog``. Two whole-catalog runs per pair would take CI past its
    hour; the gate benchmark (``python -m benchmarks --only gate``) runs them."""
    if os.environ.get("ROLLOUT_CHAOS_GATE_SCOPE") == "catalog":
        return []
    chosen = pair.fixed | pair.regressions | pair.controls | {pair.fixes}
    return [str(REPO / "scenarios" / f"{name}.chaos.yaml") for name in sorted(chosen)]


def _gate(
    pair: Pair, base: Path, head: Path, report: Path, *scenarios: str, runs: tuple[str, ...] = RUNS
) -> tuple[int, dict[str, Any]]:
    """The gate as a user runs it, but a moved verdict is confirmed by one more run, not two (the
    default 3 would take CI past its hour; ``tests/gate`` runs the default)."""
    arguments = ["gate", "--target", pair.target, "--base", str(base), "--head", str(head), *runs]
    arguments += ["--head-target", pair.head_target] if pair.head_target else []
    arguments += ["--expect-fixed", pair.fixes, "--json", str(report), *scenarios]
    status = cli.main(arguments)
    return status, json.loads(report.read_text())


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_the_gate_shows_the_fix_and_every_other_verdict_the_pr_changes(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = PAIRS[name]
    base, head = _archives(pair)
    monkeypatch.chdir(REPO)
    status, document = _gate(pair, base, head, tmp_path / "gate.json", *_scenarios(pair))
    changes = {entry["scenario"]: entry for entry in document["scenarios"]}
    moved = {s: entry["change"] for s, entry in changes.items() if entry["change"] not in UNCHANGED}
    assert {s for s, change in moved.items() if change == "unstable"} <= pair.by_chance, moved
    fixed = {s for s, change in moved.items() if change == "fixed"}
    assert fixed - pair.by_chance == pair.fixed - pair.by_chance, moved
    regressions = {s for s, change in moved.items() if change == "regression"}
    assert regressions - pair.by_chance == pair.regressions - pair.by_chance, moved
    target = changes[pair.fixes]
    assert target["base"]["invariants"][pair.by] == "FAIL", target["base"]["message"]
    if pair.fails_alone:
        red = {
            side: {
                name for name, status in target[side]["invariants"].items() if status in ("FAIL", "UNKNOWN")
            }
            for side in ("base", "head")
        }
        assert red == {"base": {pair.by}, "head": set()}, (
            target["base"]["message"],
            target["head"]["message"],
        )
    for words in pair.base_says:
        assert words in target["base"]["message"], target["base"]["message"]
    not_fixed = [failure for failure in document["failures"] if "expected fixed" in failure]
    if pair.still_raises:
        assert target["head"]["invariants"][pair.by] == "FAIL", target["head"]["message"]
        assert pair.still_raises in target["head"]["message"], target["head"]["message"]
        assert [failure.split(":")[0] for failure in not_fixed] == [pair.fixes], not_fixed
        assert pair.still_raises in not_fixed[0], not_fixed
    else:
        assert target["head"]["invariants"][pair.by] == "PASS", target["head"]["message"]
        assert not not_fixed, not_fixed
    # A baseline red on both sides leaves the gate "not judged" (exit 2) whatever else moved.
    green = changes["baseline"]["change"] == "passed on both"
    assert status == (1 if pair.regressions or pair.still_raises else 0 if green else 2), (
        document["failures"],
        document["not_judged"],
    )
    baseline_not_judged = [line for line in document["not_judged"] if line.startswith("baseline: not judged")]
    assert bool(baseline_not_judged) is not green, document["not_judged"]
    # Each side names its tree and the commit its git archive records, and what ran it: this
    # interpreter, with how it meets the tree's requires-python (3.13.0 against NeMo RL's >=3.13.13:
    # a patch-level mismatch, run with a warning).
    for side, tree, archive in (("base", pair.base, base), ("head", pair.head, head)):
        environment = document[side]["environment"]
        assert environment["trainer"]["tree"] == tree
        assert environment["trainer"]["commit"].startswith(tree.rpartition("-")[2]), environment
        python = environment["python"]
        assert python["version"] == platform.python_version()
        fit = python_fit(archived_requires_python(archive), platform.python_version())
        assert python["mismatch"] == (None if fit in (None, "accepted") else fit), python
        assert (python["warning"] is None) is (python["mismatch"] is None), python
    assert document["environments_differ"] == []


def test_skyrls_flag_off_by_default_changes_no_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PR #1986 with ``generator.skip_failed_rollouts`` at its default: ``generate`` takes the same
    ``tqdm.gather`` path as before, so every verdict stays, red ones included; the baseline is
    green and judged on both sides (multi-turn rows through SkyRL's generator), so the gate passes."""
    pair = dataclasses.replace(PAIRS["skyrl#1986"], head_target=None)
    base, head = _archives(pair)
    monkeypatch.chdir(REPO)
    arguments = ["gate", "--target", pair.target, "--base", str(base), "--head", str(head)]
    report = tmp_path / "gate.json"
    status = cli.main([*arguments, *RUNS, "--json", str(report), *_scenarios(pair)])
    document = json.loads(report.read_text())
    changes = {entry["scenario"]: entry for entry in document["scenarios"]}
    assert {s for s, entry in changes.items() if entry["change"] not in UNCHANGED} == set(), changes
    assert changes[pair.fixes]["base"]["invariants"][pair.by] == "FAIL"
    assert changes[pair.fixes]["head"]["invariants"][pair.by] == "FAIL"
    assert document["failures"] == []
    assert changes["baseline"]["change"] == "passed on both", changes["baseline"]
    assert status == 0, document["not_judged"]
