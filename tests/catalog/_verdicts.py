"""Run scenarios in a child pytest and read each scenario's verdicts back from its JUnit XML."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "scenarios"
CATALOG_NAMES = sorted(path.name.removesuffix(".chaos.yaml") for path in CATALOG.glob("*.chaos.yaml"))
# Plugins a child run of scenarios never uses, left out where installed: Hypothesis's pytest plugin
# (about 0.7 s at each start, and a child runs no Hypothesis test) and Hydra's (about 0.5 s more in
# NeMo RL's venv). A name that is not installed is ignored.
UNUSED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:hydra_pytest")


@dataclass
class ScenarioVerdicts:
    """One scenario's outcome in the child run: passed or not, and each invariant's status."""

    name: str
    passed: bool
    invariants: dict[str, str] = field(default_factory=dict)
    message: str = ""
    skipped: str | None = None  # the skip reason, when the scenario could not run on this stack


def run_catalog(
    tmp_path: Path,
    *,
    target: str,
    scenarios: list[str] | None = None,
    stack_args: Sequence[str] = (),
    timeout_s: float = 900,
    files: Sequence[Path] = (),
) -> dict[str, ScenarioVerdicts]:
    """Run ``scenarios`` (file stems; all when None and no ``files``) and the scenario ``files``
    (written by a test, anywhere; read with this repository's pytest settings) against ``target``
    on the stack ``stack_args`` choose (``--rollout-chaos-backend=...`` and the like); verdicts by
    scenario name."""
    paths = (
        ([] if files else [str(CATALOG)])
        if scenarios is None
        else [str(CATALOG / f"{name}.chaos.yaml") for name in scenarios]
    )
    paths += [str(path) for path in files]
    junit = tmp_path / f"junit-{target.replace(':', '_').replace('/', '_')}.xml"
    # This checkout first, then what the caller's path adds (packages kept beside the interpreter's own)
    inherited = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--rollout-chaos",
        f"--rollout-chaos-target={target}",
        "-p",
        "no:cacheprovider",
        *UNUSED_PLUGINS,
        "-q",
        f"--junitxml={junit}",
        f"--basetemp={tmp_path / 'inner'}",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        *(["-c", str(REPO / "pyproject.toml")] if files else []),
        *stack_args,
        *paths,
    ]
    completed = subprocess.run(
        command,
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *inherited])},
    )
    if not junit.exists():
        raise AssertionError(
            f"the child pytest wrote no JUnit XML:\n{completed.stdout[-4000:]}\n{completed.stderr[-2000:]}"
        )
    return parse_junit(junit)


def parse_junit(path: Path) -> dict[str, ScenarioVerdicts]:
    results: dict[str, ScenarioVerdicts] = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        properties = {item.get("name", ""): item.get("value", "") for item in case.iter("property")}
        name = properties.get("scenario") or case.get("name") or "?"
        results[name] = ScenarioVerdicts(
            name=name,
            passed=problem is None and case.find("skipped") is None,
            invariants={
                key.removeprefix("invariant:"): value
                for key, value in properties.items()
                if key.startswith("invariant:")
            },
            # whole: a test may look for what the story says last (where the collector broke)
            message="" if problem is None else problem.get("message", "") + "\n" + (problem.text or ""),
            skipped=None if (skip := case.find("skipped")) is None else skip.get("message", ""),
        )
    return results


if __name__ == "__main__":  # a quick look: python -m tests.catalog._verdicts TARGET [SCENARIO...]
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for verdicts in run_catalog(
            Path(scratch), target=sys.argv[1], scenarios=sys.argv[2:] or None
        ).values():
            failing = {name: status for name, status in verdicts.invariants.items() if status != "PASS"}
            print(f"{'PASS' if verdicts.passed else 'FAIL'} {verdicts.name} {failing}")
