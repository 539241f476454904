"""Upstream lines an adapter runs as copied, and whether the tree in use still has them.

Where an upstream step is no function of its own (``grpo_train``'s inline data-processing block),
an adapter runs its lines as written upstream. Such a copy is true only for the trees it was
copied from: on a tree whose function changed, running it would judge the adapter's old lines,
not the trainer. So the adapter records a fingerprint of each function it copied from, per
version it was checked against, and declines (``NotJudgedError``) on a tree whose function has
another, naming the function, the file and the line, rather than run a stale copy. Where upstream
changed the function and the adapter copied it again, ``Versions`` holds one copy per version and
picks the one whose fingerprint is the tree's, so the older trees keep running their own copy.

A fingerprint is a digest of the function's syntax tree without its docstring: comments, blank
lines, formatting and where the function sits in its file do not move it; any change to what it
does does.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pytest_rollout_chaos.errors import NotJudgedError

DIGEST_CHARS: Final = 16
VERSIONED_FIELDS: Final = frozenset({"type_params", "type_comment", "kind"})
"""Syntax-tree fields that exist on some Pythons only, or say nothing of what the code does."""


@dataclass(frozen=True, slots=True)
class Located:
    """A function as found in a file: its fingerprint and first line; ``None`` when absent."""

    path: Path
    line: int | None
    fingerprint: str | None


@dataclass(frozen=True, slots=True)
class CopiedFrom:
    """An upstream function whose lines an adapter runs as copied, and the versions it mirrors."""

    module: str  # dotted, e.g. ``nemo_rl.algorithms.grpo``
    function: str  # a top-level function of that module, or a method as ``Class.method``
    fingerprints: frozenset[str]  # of the function in every tree the copy was checked against
    trees: str  # those trees, for the message

    def locate(self, path: Path) -> Located:
        """The function in the source file ``path``."""
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (OSError, SyntaxError, UnicodeDecodeError):
            return Located(path, None, None)
        owner, _, name = self.function.rpartition(".")
        body = tree.body
        if owner:
            classes = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == owner]
            body = classes[0].body if classes else []
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                return Located(path, node.lineno, fingerprint(node))
        return Located(path, None, None)

    def source_file(self) -> Path | None:
        """Where the module would be imported from now (the tree first on ``sys.path``)."""
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError):
            return None
        return Path(spec.origin) if spec is not None and spec.origin else None

    def stale(self, path: Path | None = None) -> str | None:
        """Why the copy does not hold for the tree in use (``path``: the module's file), or None."""
        path = path or self.source_file()
        if path is None:
            return None  # the import fails later, and says so itself
        found = self.locate(path)
        if found.fingerprint is None:
            return (
                f"{self.function} is gone from {self.module} ({path}): the adapter runs lines copied from it"
            )
        if found.fingerprint in self.fingerprints:
            return None
        return (
            f"{self.function} changed since the adapter's copy ({path}:{found.line}, fingerprint "
            f"{found.fingerprint}; the copy mirrors {self.trees}): its copied lines would judge the adapter, "
            "not the trainer"
        )

    def require(self, path: Path | None = None) -> None:
        """Raise ``NotJudgedError`` when the copy does not hold for the tree in use."""
        why = self.stale(path)
        if why is not None:
            raise NotJudgedError(why)


@dataclass(frozen=True, slots=True)
class Versions:
    """One upstream function copied once per version of it (oldest first): the copy a tree needs."""

    copies: tuple[CopiedFrom, ...]

    def __post_init__(self) -> None:
        if not self.copies or len({(copy.module, copy.function) for copy in self.copies}) != 1:
            raise ValueError("Versions holds copies of one upstream function, at least one")

    def every(self) -> CopiedFrom:
        """All copies as one, for the message that no copy holds (it names every tree mirrored)."""
        first = self.copies[0]
        return CopiedFrom(
            module=first.module,
            function=first.function,
            fingerprints=frozenset().union(*(copy.fingerprints for copy in self.copies)),
            trees="; ".join(copy.trees for copy in self.copies),
        )

    def chosen(self, path: Path | None = None) -> CopiedFrom | None:
        """The copy whose function is the tree's (``path``: the module's file); None when none is,
        or when the module cannot be found (its import then says why)."""
        first = self.copies[0]
        path = path or first.source_file()
        if path is None:
            return None
        found = first.locate(path).fingerprint
        return next((copy for copy in self.copies if found in copy.fingerprints), None)

    def stale(self, path: Path | None = None) -> str | None:
        """Why no copy holds for the tree in use, or None."""
        return self.every().stale(path)

    def require(self, path: Path | None = None) -> CopiedFrom:
        """The copy the tree in use needs; ``NotJudgedError`` when there is none."""
        self.every().require(path)
        chosen = self.chosen(path)
        if chosen is None:  # the module is not importable: no copy to run, and nothing judged
            first = self.copies[0]
            raise NotJudgedError(f"{first.module} cannot be found: no copy of {first.function} to run")
        return chosen


def fingerprint(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A digest of what ``function`` does: its syntax tree without positions and docstring, the
    same on every Python this runs on (fields later versions added are left out)."""
    body = function.body
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        body = body[1:]
    parts = [
        function.name,
        *(_shape(part) for part in (function.args, function.decorator_list, function.returns, body)),
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:DIGEST_CHARS]


def _shape(node: object) -> str:
    """``node`` written out field by field, without the fields only some Python versions have."""
    if isinstance(node, ast.AST):
        fields = ", ".join(
            f"{name}={_shape(getattr(node, name, None))}"
            for name in node._fields
            if name not in VERSIONED_FIELDS
        )
        return f"{type(node).__name__}({fields})"
    if isinstance(node, list):
        return "[" + ", ".join(_shape(item) for item in node) + "]"
    return repr(node)
