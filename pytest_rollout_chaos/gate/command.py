"""``rollout-chaos gate``: check what was asked, run base and head, compare, write the outputs.

What was asked is checked before anything runs (``preflight``: each side's request, interpreter
and environment). The two sides run at the same time, each its own pytest (``--sequential``: one
after the other, where they would fight over one GPU or too few cores).

Exit status: 0 when no scenario regressed and every ``--expect-fixed`` scenario went from red to
green; 1 when one regressed (red, skipped or missing on head after passing on base, unless
``--allow-skip`` names it) or an expected fix is not there; 2 when the gate could not judge (bad
usage, an interpreter of a minor version the tree's ``requires-python`` rejects, a side that ran
no scenario, a trainer module the collector could not import, a scenario red on base and skipped
on head or declined by the collector (``NOT_JUDGED``), ``baseline`` not green on both sides, fewer
than half of the scenarios judged on both).

``baseline`` always runs beside the scenarios asked for. A scenario whose verdict moved is run
``--runs`` times in all, each further run on both sides with the next seed; the move counts only
when every run shows it (``compare``).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Final, TextIO

from pytest_rollout_chaos import targets
from pytest_rollout_chaos.gate import render
from pytest_rollout_chaos.gate.compare import EXIT_NOT_JUDGED, compare, moved
from pytest_rollout_chaos.gate.preflight import interpreter, side_environment, side_request
from pytest_rollout_chaos.gate.sides import (
    GateUsageError,
    SideRequest,
    SideRun,
    SidesOverdueError,
    prepare_tree,
    run_side,
    run_sides,
    sigterm_interrupts,
)
from pytest_rollout_chaos.gate.verdicts import missing_module

EXIT_CANNOT_JUDGE: Final = EXIT_NOT_JUDGED
DESCRIPTION: Final = (
    "Run the scenarios (the built-in catalog by default) against a trainer's base tree and its head "
    "tree, same seed, each in its own pytest; print scenario x base x head with the invariants that "
    "flipped. Exit 1 when head turns a passing scenario red, skipped or missing (a skip is not a fix; "
    "--allow-skip names an intended one) or an --expect-fixed scenario is not red on base and green "
    "on head; 2 when something could not be judged: a side that ran no scenario, a trainer module "
    "the collector could not import (named, with its install line), a scenario red on base and "
    "skipped or missing on head, or declined by the collector (NOT_JUDGED), baseline not green on "
    "both sides, fewer than half of the scenarios judged on both; 0 otherwise. baseline always runs; "
    "a verdict that moved is rerun with other seeds (--runs) and counts only when every run shows it."
)
DEFAULT_RUNS: Final = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target", required=True, help=f"{', '.join(targets.ADAPTERS)}, or MODULE:FACTORY (both sides)"
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
        help="The trainer environment's interpreter (default: the trainer's "
        "ROLLOUT_CHAOS_<TRAINER>_PYTHON, e.g. ROLLOUT_CHAOS_NEMO_RL_PYTHON, else this one)",
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
    parser.add_argument(
        "--runs",
        type=int,
        default=DEFAULT_RUNS,
        metavar="N",
        help="Runs a moved verdict (fixed or regression) must hold in: the scenarios that moved run "
        "N-1 more times on both sides, seeds --seed+1, --seed+2, ...; a move that does not hold in "
        f"every run is 'unstable' (default: {DEFAULT_RUNS}; 1 runs each scenario once)",
    )
    parser.add_argument(
        "--ignore-requires-python",
        action="store_true",
        help="Run a side even when its tree's pyproject.toml requires-python rejects the minor "
        "version of the side's interpreter (the outputs say so); without it the gate refuses to run "
        "it. A patch release it rejects (3.13.0 against >=3.13.13) runs anyway, with a warning",
    )
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
        "--sequential",
        action="store_true",
        help="Run head after base instead of both at the same time (where the two runs would fight "
        "over one GPU or too few cores)",
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
    """The gate; see the module docstring for the exit status. SIGTERM stops it as Ctrl-C does:
    both sides' children are stopped before it ends."""
    with sigterm_interrupts():
        try:
            return _gate(args, out, err)
        except SidesOverdueError as error:
            print(f"rollout-chaos gate: {error}", file=err)
            return EXIT_CANNOT_JUDGE


def _gate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    scratch = args.workdir or Path(tempfile.mkdtemp(prefix="rollout-chaos-gate-"))
    keep = args.workdir is not None
    targets = args.target if not args.head_target else f"{args.target} (head: {args.head_target})"
    try:
        request, files = side_request(args)
        base_tree = prepare_tree(args.base, scratch / "trees" / "base")
        head_tree = prepare_tree(args.head, scratch / "trees" / "head")
        head_python, head_from = interpreter(args, head=True)
        head_request = dataclasses.replace(
            request, target=args.head_target or request.target, python=head_python, python_from=head_from
        )
        ignore = args.ignore_requires_python
        base_env = side_environment("base", request, args.base, base_tree, ignore=ignore)
        head_env = side_environment("head", head_request, args.head, head_tree, ignore=ignore)
    except GateUsageError as error:
        print(f"rollout-chaos gate: {error}", file=err)
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
        return EXIT_CANNOT_JUDGE

    progress = _printer(err)
    started = time.monotonic()
    at_once = not args.sequential
    how = "at the same time as" if at_once else "then"
    print(f"rollout-chaos gate: {targets}, base {base_tree} {how} head {head_tree}", file=err, flush=True)
    for label, env in (("base", base_env), ("head", head_env)):
        print(f"{label}: {env.trainer()}; {env.executable}: {env.describe()}", file=err, flush=True)
        if env.python_warning is not None:
            print(f"rollout-chaos gate: warning: {env.python_warning}", file=err, flush=True)
    base, head = run_sides(
        [
            partial(run_side, "base", base_tree, request, scratch, progress, environment=base_env),
            partial(run_side, "head", head_tree, head_request, scratch, progress, environment=head_env),
        ],
        at_once=at_once,
        timeout_s=request.timeout_s,
    )
    unjudged = [side for side in (base, head) if not side.verdicts]
    if unjudged:
        for side in unjudged:
            print(_cannot_judge(side), file=err)
        print(f"logs kept in {scratch}", file=err)
        return EXIT_CANNOT_JUDGE
    decision = compare(base.verdicts, head.verdicts, args.expect_fixed, args.allow_skip)
    reruns = _rerun(
        moved(decision),
        files,
        ((base_tree, request), (head_tree, head_request)),
        args,
        scratch=scratch,
        progress=progress,
    )
    if reruns:
        decision = compare(
            base.verdicts,
            head.verdicts,
            args.expect_fixed,
            args.allow_skip,
            reruns=[(pair[0].verdicts, pair[1].verdicts) for pair in reruns],
        )
    keep = keep or not decision.passed
    if not keep:
        base.log = head.log = None  # removed below: a passing gate leaves nothing behind
        for pair in reruns:
            pair[0].log = pair[1].log = None
    took = render.Took(wall_s=time.monotonic() - started, at_once=at_once)
    print(render.text(decision, base, head, took), file=out)
    if args.json is not None:
        args.json.write_text(
            render.as_json(
                decision,
                base,
                head,
                target=targets,
                seed=args.seed,
                scenarios=request.scenarios,
                reruns=reruns,
                took=took,
            ),
            encoding="utf-8",
        )
    if args.markdown is not None:
        args.markdown.write_text(render.markdown(decision, base, head, targets), encoding="utf-8")
    if keep:
        print(f"logs kept in {scratch}", file=err)
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return decision.exit_code


def _rerun(
    names: Sequence[str],
    files: Mapping[str, Path],
    sides: tuple[tuple[Path, SideRequest], tuple[Path, SideRequest]],
    args: argparse.Namespace,
    *,
    scratch: Path,
    progress: Callable[[str], None],
) -> list[tuple[SideRun, SideRun]]:
    """Run the scenarios that moved ``--runs`` - 1 more times on both sides, the seed one higher
    each time: (base, head) per run."""
    if not names or args.runs <= 1:
        return []
    progress(
        f"rollout-chaos gate: {len(names)} verdict(s) moved ({', '.join(names)}); {args.runs - 1} more run(s)"
    )
    paths = [str(files[name]) for name in names]
    runs = []
    for at in range(2, args.runs + 1):
        base, head = run_sides(
            [
                partial(
                    run_side,
                    f"{label}-run{at}",
                    tree,
                    dataclasses.replace(request, seed=args.seed + at - 1, scenarios=paths),
                    scratch,
                    progress,
                )
                for label, (tree, request) in zip(("base", "head"), sides, strict=True)
            ],
            at_once=not args.sequential,
            timeout_s=args.timeout_s,
        )
        runs.append((base, head))
    return runs


def _printer(err: TextIO) -> Callable[[str], None]:
    """Print a progress line to ``err``, whole: both sides print from their own threads."""
    printing = threading.Lock()

    def progress(line: str) -> None:
        with printing:
            print(line, file=err, flush=True)

    return progress


def _cannot_judge(side: SideRun) -> str:
    why = "timed out" if side.timed_out else f"pytest exited {side.exit_code} with no scenario verdicts"
    missing = missing_module("\n".join(side.output_tail))
    if missing is not None:
        install = f"; install it with: {missing.install}" if missing.install else ""
        why += f": the trainer could not be imported, module {missing.module!r} is missing{install}"
    tail = "\n".join(f"  | {line}" for line in side.output_tail[-20:])
    return f"rollout-chaos gate: the {side.label} run ({side.tree}) {why}; its last lines:\n{tail}"
