"""The SkyRL trees the adapter is tested on, and a deliberately broken adapter that swallows SkyRL's
exception.

The trees are ``git archive``s of NovaSky-AI/SkyRL (``tests.collector.adapters._trees`` finds them):
``BASE`` is PR #1986's base (``SkyRLGymGenerator.generate`` gathers its rollouts with
``tqdm.gather``, so the first raising one aborts the step), ``HEAD`` the PR's head
(``generator.skip_failed_rollouts``, off by default), ``MAIN`` SkyRL's main of 2026-08-21, 35
commits past the base and without the PR. SkyRL needs Python 3.12 and its own dependencies;
without them the tests that need a tree skip, saying so.

``SwallowingSkyRLCollector`` is the adapter with one fault of its own: it wraps SkyRL's
``agent_loop`` and turns a raising rollout into a placeholder itself (what PR #1986 does, done by
the adapter instead of by SkyRL), so on ``BASE`` it hides the bug the real adapter exposes. The
fidelity test runs it to show the gate would catch such an adapter.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from pytest_rollout_chaos.collector.adapters import skyrl, skyrl_output, skyrl_upstream
from tests.collector.adapters._trees import pinned_tree

BASE: Final = "skyrl-1ec7fae4"
HEAD: Final = "skyrl-caf4ce6f"
MAIN: Final = "skyrl-a9564572"
SCENARIO: Final = "verifier-exception-isolated"
SKYRL_DEPENDENCIES: Final = (
    "torch",
    "transformers",
    "loguru",
    "omegaconf",
    "hydra",
    "orjson",
    "pybase64",
    "cloudpathlib",
    "datasets",
    "peft",
    "jaxtyping",  # RayPPOTrainer's step (skyrl.train.trainer and what it imports)
    "torchdata",
)
PYTHON: Final = (3, 12)


def unpack(name: str, into: Path) -> Path:
    """The tree of tarball ``name`` unpacked under ``into`` (once); skip where SkyRL cannot run."""
    if sys.version_info < PYTHON:
        pytest.skip(
            f"{name}: SkyRL needs Python {PYTHON[0]}.{PYTHON[1]} (its pydantic models refuse "
            f"typing.TypedDict before it); this is {sys.version_info.major}.{sys.version_info.minor}"
        )
    return pinned_tree(name, into, needs=SKYRL_DEPENDENCIES, holds="skyrl/__init__.py", trainer="skyrl")


@contextlib.contextmanager
def importable(tree: Path) -> Iterator[None]:
    """``skyrl`` and ``skyrl_gym`` imported from ``tree`` inside the block (any ``skyrl`` module
    imported before is dropped first, so each tree's own code is the one read)."""
    entries = [str(tree / "skyrl-gym"), str(tree)]
    for entry in entries:
        sys.path.insert(0, entry)
    for name in [name for name in sys.modules if name.split(".")[0] in ("skyrl", "skyrl_gym")]:
        del sys.modules[name]
    try:
        yield
    finally:
        for entry in entries:
            sys.path.remove(entry)


class SwallowingSkyRLCollector(skyrl.SkyRLCollector):
    """BROKEN ON PURPOSE: catches each rollout's exception and hands back a placeholder itself."""

    async def generate(self, trainer: Any, batch: Any) -> Any:
        module: Any = importlib.import_module(skyrl_upstream.GENERATOR_MODULE)
        generator = trainer.generator
        agent_loop: Callable[..., Awaitable[Any]] = generator.agent_loop
        pad = self.tokenizer.pad_token_id

        async def swallowing(*args: Any, **kwargs: Any) -> Any:
            try:
                return await agent_loop(*args, **kwargs)
            except Exception:
                return module.TrajectoryOutput(
                    response_ids=[pad],
                    reward=[0.0],
                    stop_reason=skyrl_output.PLACEHOLDER_STOP_REASON,
                    loss_mask=[0],
                    prompt_ids=[pad],
                    rollout_logprobs=[0.0],
                    env_metrics={},
                )

        generator.agent_loop = swallowing
        return await trainer.generate(batch)


swallowing_factory = SwallowingSkyRLCollector
"""``--rollout-chaos-target=tests.collector.adapters._skyrl_trees:swallowing_factory`` (the class, so its
``modes`` and ``reaches`` apply as the real adapter's do)."""
