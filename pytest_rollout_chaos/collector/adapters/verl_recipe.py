"""The verl recipe as verl imports it: ``recipe.nemo_gym``, beside NeMo Gym's own ``nemo_gym``.

A verl checkout holds verl-recipe as its ``recipe/`` submodule, and a run names the manager
``recipe.nemo_gym.agent_loop.NeMoGymAgentLoopManager``: the recipe's folder ``nemo_gym`` is a
subpackage of ``recipe``, and the top-level ``nemo_gym`` is NeMo Gym's package, which the recipe's
``_init_nemo_gym`` imports (``nemo_gym.cli``, ``nemo_gym.rollout_collection``). A verl-recipe
checkout given with ``--rollout-chaos-upstream`` is put first on ``sys.path`` with its root holding
``nemo_gym/``, where that folder would hide NeMo Gym's package. ``mount`` makes that root the
package ``recipe`` and takes it off ``sys.path``, as verl's layout has it; a verl checkout whose
``recipe`` imports already needs nothing.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from typing import Final

PACKAGE: Final = "recipe"
MODULE: Final = f"{PACKAGE}.nemo_gym.agent_loop"
MARKER: Final = Path("nemo_gym") / "agent_loop.py"
"""What tells a verl-recipe checkout's root from other ``sys.path`` entries."""


def mount() -> Path | None:
    """Make the first verl-recipe root on ``sys.path`` the package ``recipe``, off ``sys.path``;
    the root mounted, or None when no entry is one (``recipe`` then comes from where it is)."""
    root = next((Path(entry) for entry in sys.path if entry and (Path(entry) / MARKER).is_file()), None)
    if root is None:
        return None
    sys.path[:] = [entry for entry in sys.path if not entry or Path(entry) != root]
    forget(under=root)
    spec = importlib.machinery.ModuleSpec(PACKAGE, None, is_package=True)
    spec.submodule_search_locations = [str(root)]
    sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)
    return root


def root() -> Path | None:
    """The folder the imported ``recipe`` package reads from, or None before ``mount``."""
    package = sys.modules.get(PACKAGE)
    locations = list(getattr(package, "__path__", None) or [])
    return Path(locations[0]) if locations else None


def forget(*, under: Path | None = None) -> None:
    """Drop the recipe's modules (``recipe``, and a ``nemo_gym`` read from ``under``) from
    ``sys.modules``, so the next import reads the tree mounted next."""
    for name, module in list(sys.modules.items()):
        if name == PACKAGE or name.startswith(f"{PACKAGE}."):
            del sys.modules[name]
        elif under is not None and (name == "nemo_gym" or name.startswith("nemo_gym.")):
            origin = getattr(module, "__file__", None)
            if origin is not None and Path(origin).is_relative_to(under):
                del sys.modules[name]
