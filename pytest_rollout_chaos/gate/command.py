"""``rollout-chaos gate``: check what was asked, run base then head, compare, write the outputs.

Exit status: 0 when no scenario regressed and every ``--expect-fixed`` scenario went from red to
green; 1 when one regressed (red, skipped or missing on head after passing on base, unless
``--allow-skip`` names it) or an expected fix is not there; 2 when the gate could not judge (bad
usage, a side that ran no scenario, a trainer module the collector could not import, a scenario
red on base and skipped on head).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.gate import render
from pytest_rollout_chaos.gate.compare import EXIT_NOT_JUDGED, compare
from pytest_rollout_chaos.gate.environment import probe
from pytest_rollout_chaos.gate.sides import (
    GateUsageError,
    SideRequest,
    SideRun,
    check_python,
    prepare_tree,
    run_side,
)
from pytest_rollout_chaos.gate.verdicts import missing_module
from pytest_rollout_chaos.scenario.model import SUFFIX, ScenarioFileError, load_scenario

EXIT_CANNOT_JUDGE: Final = EXIT_NOT_JUDGED
DESCRIPTION: Final = (
    "Run the scenarios (the built-in catalog by default) against a trainer's base tree and its head "
    "tree, same seed, each in its own pytest; print scenario x base x head with the invariants that "
    "flipped. Exit 1 when head turns a passing scenario red, skipped or missing (a skip is not a fix; "
    "--allow-skip names an intended one) or an --expect-fixed scenario is not red on base and green "
    "on head; 2 when something could not be judged: a side that ran no scenario, a trainer module "
    "the collector could not import (named, with its install line), a scenario red on base and "
    "skipped or missing on head; 0 otherwise."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target", required=True, help="nemo_rl, slime, verl, skyrl, or MODULE:FACTORY (both sides)"
    )
    parser.add_argument(
        "--head-target",
        metavar="TARGET",
        help="The head side's target, when it differs from --target: a setting the PR adds that the "
        "base tree lacks, e.g. --target skyrl --head-target skyrl_skip_failed_rollouts",
    )
    parser.add_argument("--base", required=True, type=Path, help="The base tree: a checkout or a .tar.gz")
    parser.add_argument("--head", required=True, type=Path, help="The head tree (the PR)")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="The trainer environment's interpreter (default: this one)",
    )
    parser.add_argument(
        "--head-python",
        metavar="PYTHON",
        help="The head side's interpreter, when it differs from --python (another environment: "
        "the outputs then flag every version that differs)",
    )
    parser.add_argument(
        "--expect-fixed",
        action="append",
        default=[],
        metavar="NAME",
        help="A scenario the head must fix: red on base, passed on head (repeatable)",
    )
    parser.add_argument(
        "--allow-skip",
        action="append",
        default=[],
        metavar="NAME",
        help="A scenario head may skip or leave out although base passed it; otherwise that is a "
        "regression (repeatable)",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of both sides (default: 0)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="Write the comparison as JSON")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="Write a Markdown PR comment")
    parser.add_argument(
        "--timeout-s", type=float, default=1800.0, help="Deadline of each side's run (default: 1800)"
    )
    parser.add_argument(
        "--pytest-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="Passed on to both pytest runs, e.g. --pytest-arg=--rollout-chaos-gym=nemo-gym (repeatable)",
    )
    parser.add_argument(
        "--workdir", type=Path, help="Keep the sides' logs and JUnit XML here (default: a temporary folder)"
    )
    parser.add_argument(
        "scenarios",
        nargs="*",
        type=Path,
        metavar="SCENARIO_PATHS",
        help="Files or folders (default: catalog)",
    )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The gate; see the module docstring for the exit status."""
    scratch = args.workdir or Path(tempfile.mkdtemp(prefix="rollout-chaos-gate-"))
    keep = args.workdir is not None
    try:
        request = _request(args)
        base_tree = prepare_tree(args.base, scratch / "trees" / "base")
        head_tree = prepare_tree(args.head, scratch / "trees" / "head")
    except GateUsageError as error:
        print(f"rollout-chaos gate: {error}", file=err)
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
        return EXIT_CANNOT_JUDGE

    def progress(line: str) -> None:
        print(line, file=err, flush=True)

    targets = args.target if not args.head_target else f"{args.target} (head: {args.head_target})"
    print(f"rollout-chaos gate: {targets}, base {base_tree} then head {head_tree}", file=err, flush=True)
    head_request = dataclasses.replace(
        request, target=args.head_target or request.target, python=args.head_python or request.python
    )
    base_env = probe(request.python, args.base, base_tree)
    head_env = probe(head_request.python, args.head, head_tree)
    for label, env in (("base", base_env), ("head", head_env)):
        print(f"{label}: {env.trainer()}; {env.describe()}", file=err, flush=True)
    base = run_side("base", base_tree, request, scratch, progress, environment=base_env)
    head = run_side("head", head_tree, head_request, scratch, progress, environment=head_env)
    unjudged = [side for side in (base, head) if not side.verdicts]
    if unjudged:
        for side in unjudged:
            print(_cannot_judge(side), file=err)
        print(f"logs kept in {scratch}", file=err)
        return EXIT_CANNOT_JUDGE
    decision = compare(base.verdicts, head.verdicts, args.expect_fixed, args.allow_skip)
    keep = keep or not decision.passed
    if not keep:
        base.log = head.log = None  # removed below: a passing gate leaves nothing behind
    print(render.text(decision, base, head), file=out)
    if args.json is not None:
        args.json.write_text(
            render.as_json(decision, base, head, target=targets, seed=args.seed, scenarios=request.scenarios),
            encoding="utf-8",
        )
    if args.markdown is not None:
        args.markdown.write_text(render.markdown(decision, base, head, targets), encoding="utf-8")
    if keep:
        print(f"logs kept in {scratch}", file=err)
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return decision.exit_code


def _request(args: argparse.Namespace) -> SideRequest:
    """What both sides run; unknown ``--expect-fixed`` and ``--allow-skip`` names are caught before
    two long runs."""
    paths = [str(path) for path in args.scenarios] or [str(bundled.catalog_dir())]
    names = _scenario_names(args.scenarios or [bundled.catalog_dir()])
    for option, given in (("--expect-fixed", args.expect_fixed), ("--allow-skip", args.allow_skip)):
        unknown = [name for name in given if name not in names]
        if unknown:
            raise GateUsageError(
                f"{option} {', '.join(unknown)}: no such scenario among those run "
                f"(valid: {', '.join(sorted(names))})"
            )
    both = sorted(set(args.expect_fixed) & set(args.allow_skip))
    if both:
        raise GateUsageError(
            f"--expect-fixed and --allow-skip both name {', '.join(both)}: a scenario head must fix "
            "cannot be one it may skip"
        )
    check_python(args.python)
    if args.head_python:
        check_python(args.head_python)
    return SideRequest(
        target=args.target,
        python=args.python,
        seed=args.seed,
        scenarios=paths,
        pytest_args=args.pytest_arg,
        timeout_s=args.timeout_s,
    )


def _scenario_names(paths: Sequence[Path]) -> set[str]:
    names: set[str] = set()
    for path in paths:
        if not path.exists():
            raise GateUsageError(f"{path}: no such scenario file or folder")
        for file in sorted(path.rglob(f"*{SUFFIX}")) if path.is_dir() else [path]:
            try:
                names.add(load_scenario(file).name)
            except ScenarioFileError as error:
                raise GateUsageError(
                    f"{file}: invalid scenario (see rollout-chaos validate {file}): {error.problems[0]}"
                ) from error
    return names


def _cannot_judge(side: SideRun) -> str:
    why = "timed out" if side.timed_out else f"pytest exited {side.exit_code} with no scenario verdicts"
    missing = missing_module("\n".join(side.output_tail))
    if missing is not None:
        install = f"; install it with: {missing.install}" if missing.install else ""
        why += f": the trainer could not be imported, module {missing.module!r} is missing{install}"
    tail = "\n".join(f"  | {line}" for line in side.output_tail[-20:])
    return f"rollout-chaos gate: the {side.label} run ({side.tree}) {why}; its last lines:\n{tail}"
