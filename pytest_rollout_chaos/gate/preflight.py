"""Before the gate's two long runs: what it was asked, checked at once (a ``GateUsageError`` if not).

``side_request`` reads what both sides run: the scenario files by name (``baseline`` added when
the paths given do not hold it), the seed, the deadline and the pytest arguments. It refuses an
``--expect-fixed`` or ``--allow-skip`` name no scenario has, a name given to both, ``--runs`` below
1 and an interpreter that cannot import pytest and this plugin.

Each side's interpreter is ``--head-python`` (head only), ``--python``, the environment variable
of the side's trainer (``targets.python_env``: ``ROLLOUT_CHAOS_NEMO_RL_PYTHON``, ...), else this
one (``interpreter``). ``side_environment`` reads the side's environment in it and checks it against
the side's tree: a patch release the tree does not accept (3.13.0 against ``>=3.13.13``) runs with
a warning in every output; a minor version it does not accept is refused unless
``--ignore-requires-python``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from pytest_rollout_chaos import bundled, targets
from pytest_rollout_chaos.collector.adapters import gym_client
from pytest_rollout_chaos.gate.compare import BASELINE
from pytest_rollout_chaos.gate.environment import SideEnvironment, probe
from pytest_rollout_chaos.gate.sides import GateUsageError, SideRequest, check_python
from pytest_rollout_chaos.scenario.model import SUFFIX, ScenarioFileError, load_scenario, scenario_files

THIS_PYTHON: Final = "the gate's own interpreter"


def interpreter(args: argparse.Namespace, *, head: bool) -> tuple[str, str]:
    """A side's interpreter and who named it: ``--head-python`` (head), ``--python``, the side's
    trainer's environment variable, else this interpreter."""
    if head and args.head_python:
        return args.head_python, "--head-python"
    if args.python:
        return args.python, "--python"
    variable = targets.python_env((args.head_target or args.target) if head else args.target)
    if variable is not None and os.environ.get(variable):
        return os.environ[variable], variable
    return sys.executable, THIS_PYTHON


def side_request(args: argparse.Namespace) -> tuple[SideRequest, dict[str, Path]]:
    """What both sides run, and each scenario's file by name; unknown ``--expect-fixed`` and
    ``--allow-skip`` names are caught before two long runs. ``baseline`` is added when the paths
    given do not hold it: without it green on both sides no verdict means anything."""
    given = list(args.scenarios) or [bundled.catalog_dir()]
    files = _scenario_files(given)
    if BASELINE not in files:
        files[BASELINE] = bundled.catalog_dir() / f"{BASELINE}{SUFFIX}"
        given.append(files[BASELINE])
    for option, named in (("--expect-fixed", args.expect_fixed), ("--allow-skip", args.allow_skip)):
        unknown = [name for name in named if name not in files]
        if unknown:
            raise GateUsageError(
                f"{option} {', '.join(unknown)}: no such scenario among those run "
                f"(valid: {', '.join(sorted(files))})"
            )
    both = sorted(set(args.expect_fixed) & set(args.allow_skip))
    if both:
        raise GateUsageError(
            f"--expect-fixed and --allow-skip both name {', '.join(both)}: a scenario head must fix "
            "cannot be one it may skip"
        )
    if args.runs < 1:
        raise GateUsageError(f"--runs {args.runs}: valid: 1 or more")
    python, named_by = interpreter(args, head=False)
    check_python(python, named_by)
    head_python, head_named_by = interpreter(args, head=True)
    if head_python != python:
        check_python(head_python, head_named_by)
    request = SideRequest(
        target=args.target,
        python=python,
        python_from=named_by,
        seed=args.seed,
        scenarios=[str(path) for path in given],
        pytest_args=args.pytest_arg,
        timeout_s=args.timeout_s,
    )
    return request, files


def _scenario_files(paths: Sequence[Path]) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for path in paths:
        if not path.exists():
            raise GateUsageError(f"{path}: no such scenario file or folder")
        for file in scenario_files([path]):
            try:
                files[load_scenario(file).name] = file
            except ScenarioFileError as error:
                raise GateUsageError(
                    f"{file}: invalid scenario (see rollout-chaos validate {file}): {error.problems[0]}"
                ) from error
    return files


def side_environment(
    label: str, request: SideRequest, given: Path, tree: Path, *, ignore: bool
) -> SideEnvironment:
    """The side's environment, read in its interpreter and checked against its tree.

    A tree's ``requires-python`` that rejects the interpreter's minor version is a usage error,
    unless ``ignore``; a patch release it rejects (or any, when ``ignore``) runs, the warning kept
    with the side's environment for every output.
    """
    target = request.target
    env = probe(request.python, given, tree, python_from=request.python_from)
    # NeMo Gym's own client or a stand-in: as the side's interpreter has NeMo Gym, not this one.
    env = dataclasses.replace(env, gym_client=gym_client(target, env.versions.get("nemo-gym"), probed=True))
    mismatch = env.python_mismatch()
    if mismatch is None:
        return env
    who = f"the {label} side ({target})"
    if env.python_fit() == "minor" and not ignore:
        option = "--head-python" if label == "head" else "--python"
        variable = targets.python_env(target)
        named = f"{option} or {variable}" if variable else option
        raise GateUsageError(
            f"{who}: {mismatch}, so its verdicts would be luck (valid: an interpreter the tree "
            f"accepts, named by {named}; or --ignore-requires-python to run it anyway)"
        )
    why = (
        "as --ignore-requires-python asks"
        if env.python_fit() == "minor"
        else "the gate refuses only a minor version the tree does not accept"
    )
    return dataclasses.replace(env, python_warning=f"{who}: {mismatch}; run anyway ({why})")
