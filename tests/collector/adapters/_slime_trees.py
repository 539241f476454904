"""The slime trees the adapter is tested on, and a deliberately broken adapter that repairs slime.

The trees are ``git archive``s of THUDM/slime (``tests.collector.adapters._trees`` finds them):
``BASE`` is main just before PR #2078 (a bare ``asyncio.gather`` in ``generate_and_rm_group``),
``HEAD`` is the PR's head (``return_exceptions=True`` and a one-element ``list[Sample]``
placeholder per crash), ``MAIN`` is slime's main of 2026-08-21 (the bare ``gather`` still, and
``TrajectoryManager`` making the samples).

``RepairingSlimeCollector`` is the adapter with one fault of its own: it runs each group itself
and catches the group's exception, marking the group's unfinished samples aborted with reward 0
(PR #2078's placeholder, kept a plain Sample). That is the isolation PR #2078 adds, done by the
adapter instead of by slime, so on ``BASE`` it hides the bug the real adapter exposes
(``isolated_failures``); the placeholders still reach slime's train data, where
``train_batch_sound`` sees them.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.collector.adapters import slime, slime_imports
from pytest_rollout_chaos.collector.protocol import Collector, CollectorContext
from pytest_rollout_chaos.gate.environment import requires_python
from tests.collector.adapters._trees import REPO, pinned_tree, wrong_python

BASE: Final = "slime-fec3da9b"
HEAD: Final = "slime-1bc255ed"
MAIN: Final = "slime-624b824a"
"""slime main: ``TrajectoryManager`` in place of ``merge_turns``; PR #2078 never merged."""
SCENARIO: Final = "trajectory-exception-isolated"


def unpack(name: str, into: Path) -> Path:
    """The tree of tarball ``name`` unpacked under ``into`` (once); skip when it is absent."""
    return pinned_tree(name, into, needs=(), holds="slime/__init__.py")


def cannot_import(tree: Path) -> str | None:
    """Why this interpreter cannot import slime's rollout from ``tree`` (stubs as the adapter puts
    them), or is not slime's (``wrong_python``), or None. Checked in a child process so this one
    keeps no slime modules or stubs."""
    elsewhere = wrong_python("slime", tree.name, requires_python(tree))
    if elsewhere is not None:
        return elsewhere
    probe = (
        "import sys; from pathlib import Path; "
        "from pytest_rollout_chaos.collector.adapters.upstream import use_tree; "
        "use_tree(Path(sys.argv[1])); "
        "from pytest_rollout_chaos.collector.adapters import slime; slime.UPSTREAM.require()"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tree)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or ["(no output)"])[-1]


class RepairingSlimeCollector(slime.SlimeCollector):
    """BROKEN ON PURPOSE: catches each group's exception and aborts its samples itself."""

    async def step(self, state: Any, samples: list[list[Any]]) -> list[list[Any]]:
        rollout = importlib.import_module(slime_imports.ROLLOUT_MODULE)

        async def guarded(group: list[Any]) -> list[Any]:
            try:
                done: list[Any] = await rollout.generate_and_rm_group(
                    state.args, group, state.sampling_params.copy()
                )
            except Exception as error:
                for sample in group:
                    if sample.status.name == "PENDING":  # PR #2078's placeholder, kept a plain Sample
                        sample.status = type(sample).Status.ABORTED
                        sample.reward = 0.0
                        sample.metadata["abort_reason"] = f"{type(error).__name__}: {error}"
                return group
            return done

        return list(await asyncio.gather(*(guarded(group) for group in samples)))


def repairing_factory(ctx: CollectorContext) -> Collector:
    """``--rollout-chaos-target=tests.collector.adapters._slime_trees:repairing_factory``."""
    return RepairingSlimeCollector(ctx)
