"""The package's imports run one way: down the layers below, with no circle anywhere.

Every ``import`` and ``from ... import`` in a module counts wherever it is written: at the top,
under ``if TYPE_CHECKING:`` and inside functions (a lazy import is still a dependency). Relative
imports are resolved. ``from a.b import c`` names the module ``a.b.c`` when there is one, else
``a.b``; the ``__init__`` of the packages on the way (``a``, ``a.b``) is not counted, because
every module of a package would otherwise depend on its own ``__init__``. A package's
``__init__`` is checked as a module of its package's layer; the package's own ``__init__`` (the
public API) is at the top. Strings passed to ``importlib.import_module`` are not seen.

A module may import from its own layer or a lower one. A new module must be given a layer here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

PACKAGE: Final = "pytest_rollout_chaos"
ROOT: Final = Path(__file__).resolve().parent.parent

# Bottom to top. Each entry names modules or packages by their path below the package ("" is
# the package's own ``__init__``); a module belongs to the layer of its longest matching entry.
LAYERS: Final = (
    (
        "base",
        (
            "errors",
            "json_decode",
            "history",
            "tokens",
            "http_client",
            "bundled",
            "extras",
            "version",
            "targets",
        ),
    ),
    ("servers", ("servers", "ray", "settings", "options")),
    ("collector", ("collector", "kit")),
    ("invariants", ("invariants",)),
    ("faults", ("faults",)),
    ("trial", ("stack", "trial", "acting", "injector", "preflight", "builder")),
    ("scenario", ("scenario",)),
    ("engine", ("engine",)),
    ("report", ("report", "gate")),
    (
        "plugin",
        (
            *("", "plugin", "harness", "fixtures", "stash", "fuzz"),
            *("cli", "scenario_items", "default_run", "node_ids", "run_command"),
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class Import:
    """``source`` imports ``target`` at ``path:line``."""

    source: str
    target: str
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package ``__init__``)."""
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def imports(known: dict[str, tuple[Path, bool]]) -> Iterator[Import]:
    """Every import of a module of the package by another one, as written anywhere in the source."""
    for name, (path, is_package) in known.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [_owner(alias.name, known) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else _owner(base, known)
                    for alias in node.names
                ]
            else:
                continue
            for target in dict.fromkeys(targets):
                if target and target != name:
                    yield Import(name, target, path, node.lineno)


def _owner(dotted: str, known: dict[str, tuple[Path, bool]]) -> str:
    """The longest module of the package that ``dotted`` names, or "" for another distribution."""
    parts = dotted.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    """The index in ``LAYERS`` of ``module``'s longest matching entry, or None."""
    relative = module.removeprefix(PACKAGE).removeprefix(".")
    best: tuple[int, int] | None = None
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if relative == entry or (entry and relative.startswith(entry + ".")):
                length = len(entry) if entry else 0
                if best is None or length > best[0]:
                    best = (length, index)
    return None if best is None else best[1]


def cycles(edges: list[Import]) -> list[list[Import]]:
    """One circle of imports per strongly connected group of modules (Tarjan), each as its edges."""
    graph: dict[str, list[Import]] = {}
    for edge in edges:
        graph.setdefault(edge.source, []).append(edge)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for edge in graph.get(node, []):
            if edge.target not in index:
                visit(edge.target)
                low[node] = min(low[node], low[edge.target])
            elif edge.target in stack:
                low[node] = min(low[node], index[edge.target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_circle(group, graph) for group in groups]


def _circle(group: set[str], graph: dict[str, list[Import]]) -> list[Import]:
    """A shortest path of imports from the group's first module back to itself, inside the group."""
    start = min(group)
    paths: dict[str, list[Import]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for edge in graph.get(node, []):
                if edge.target == start:
                    return [*paths[node], edge]
                if edge.target in group and edge.target not in paths:
                    paths[edge.target] = [*paths[node], edge]
                    following.append(edge.target)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # Tarjan's groups always have one


def _short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".")


def test_every_module_has_a_layer() -> None:
    unplaced = [name for name in modules() if layer_of(name) is None]
    if unplaced:
        pytest.fail(f"modules with no layer (add each to LAYERS in {__file__}): {unplaced}", pytrace=False)


def test_no_import_runs_up_a_layer() -> None:
    known = modules()
    upward = []
    for edge in imports(known):
        source, target = layer_of(edge.source), layer_of(edge.target)
        if source is not None and target is not None and target > source:
            upward.append(
                f"{edge.where()}: {_short(edge.source)} ({LAYERS[source][0]}) imports "
                f"{_short(edge.target)} ({LAYERS[target][0]})"
            )
    if upward:
        pytest.fail("imports that run up the layers:\n" + "\n".join(upward), pytrace=False)


def test_no_import_circle() -> None:
    found = cycles(list(imports(modules())))
    described = [
        " -> ".join(
            [f"{_short(edge.source)} ({edge.where()})" for edge in circle] + [_short(circle[0].source)]
        )
        for circle in found
    ]
    if found:
        pytest.fail(f"{len(found)} import circles:\n" + "\n".join(described), pytrace=False)


RUNNER_FREE: Final = ("engine", "collector")
"""Packages that import no pytest: the engine and the collectors run under any runner."""


def test_the_engine_and_the_collectors_import_no_pytest() -> None:
    found = []
    for name, (path, _) in modules().items():
        relative = name.removeprefix(PACKAGE + ".")
        if not any(relative == entry or relative.startswith(entry + ".") for entry in RUNNER_FREE):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: imports {imported}"
                for imported in names
                if imported.split(".")[0] in ("pytest", "_pytest")
            ]
    assert not found, "the engine and the collectors run without pytest:\n" + "\n".join(found)
