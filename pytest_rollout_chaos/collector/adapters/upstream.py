"""Where an adapter's trainer code comes from: the installed package, or a tree put first on sys.path.

``--rollout-chaos-upstream=PATH`` names a checkout or an unpacked ``git archive`` of the trainer;
``use_tree`` puts it first on ``sys.path`` before any adapter imports the trainer, so the same
adapter drives the base tree in one run and the head tree in the next.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path

from pytest_rollout_chaos.errors import CollectorTargetError


def use_tree(tree: Path) -> None:
    """Put ``tree`` first on ``sys.path`` (once), ahead of any installed copy of the trainer."""
    entry = str(tree.resolve())
    if entry in sys.path:
        sys.path.remove(entry)
    sys.path.insert(0, entry)


@dataclass(frozen=True, slots=True)
class Upstream:
    """A trainer an adapter drives: the modules its collection code needs, and how to get them."""

    adapter: str
    modules: tuple[str, ...]
    install: str

    def require(self) -> None:
        """Import every module; the first that fails is a ``CollectorTargetError`` naming it.

        The message names the missing module, the line that installs what is missing, and the
        option that points at a checkout instead.
        """
        for name in self.modules:
            try:
                importlib.import_module(name)
            except ImportError as error:
                missing = getattr(error, "name", None) or name
                raise CollectorTargetError(
                    f"the {self.adapter} adapter cannot import {name!r}: module {missing!r} is missing "
                    f"({error}); install it with: {self.install}; or point --rollout-chaos-upstream "
                    f"at a checkout of the trainer"
                ) from error
            except Exception as error:
                raise CollectorTargetError(
                    f"the {self.adapter} adapter cannot import {name!r}: importing it raised {error!r}"
                ) from error

    def origin(self) -> str:
        """Where the trainer's top package was imported from, for the report header."""
        module = sys.modules.get(self.modules[0].split(".")[0])
        return str(Path(module.__file__).parent) if module is not None and module.__file__ else "?"
