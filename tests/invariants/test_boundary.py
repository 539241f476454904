"""The judge owns its rules: nothing under ``invariants/`` imports the reference collector's internals.

The invariants may see the collector-under-test contract, ``collector/protocol.py``
(ARCHITECTURE.md#rollout-data and #the-collector-contract), and only the names listed in
``ALLOWED``: the data a collector hands back (``Rollout``, ``Turn`` and their literal types),
the ``Collector`` protocol ``observe`` drives, and ``row_index``, which the contract itself
defines (a row is its ``_rowidx``, else its position).
Everything else under ``collector/`` is one collector's implementation, the thing being judged:
``results``, ``failures``, ``prefix``, ``reference``, ``native``, the Gym client. A name added
to ``ALLOWED`` must be data or contract, never a check.

The other direction is closed too: the reference collector keeps its own copies of the rules
and does not import ``invariants.rules``, so a bug in one copy is caught by the other instead
of being shared by both.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

import pytest_rollout_chaos

PACKAGE: Final = Path(pytest_rollout_chaos.__file__).parent
COLLECTOR: Final = "pytest_rollout_chaos.collector"
ALLOWED: Final = {
    f"{COLLECTOR}.protocol": frozenset(
        {"Collector", "Mode", "Rollout", "RolloutStatus", "Row", "Style", "Turn", "row_index"}
    ),
}
RULES: Final = "pytest_rollout_chaos.invariants.rules"
REFERENCE_COLLECTOR: Final = ("results.py", "failures.py", "prefix.py", "reference.py", "native.py")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, module: str) -> Iterator[tuple[int, str, str | None]]:
    """``(line, module, name)`` for every import in ``source``, relative ones resolved against ``module``.

    ``name`` is None for ``import x.y``. String constants that spell a dotted module path inside
    the package count as imports too (``importlib.import_module("...")``).
    """
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                yield node.lineno, base, alias.name
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("pytest_rollout_chaos.")
            and " " not in node.value
        ):
            yield node.lineno, node.value.partition(":")[0], None


def collector_internals(source: str, module: str) -> list[str]:
    """Every import in ``source`` that reaches ``collector/`` beyond ``ALLOWED``."""
    found = []
    for line, base, imported_name in imported(source, module):
        # ``from collector import x`` imports the module ``collector.x``.
        target, name = (
            (f"{COLLECTOR}.{imported_name}", None)
            if base == COLLECTOR and imported_name
            else (base, imported_name)
        )
        if target == COLLECTOR:
            found.append(f"line {line}: import {target} (the whole collector package)")
        elif not target.startswith(f"{COLLECTOR}."):
            continue
        elif target not in ALLOWED:
            found.append(f"line {line}: {target}" + (f".{name}" if name else ""))
        elif name is not None and name not in ALLOWED[target]:
            allowed = ", ".join(sorted(ALLOWED[target]))
            found.append(f"line {line}: {name} from {target} (allowed: {allowed})")
    return found


def invariant_modules() -> list[Path]:
    return sorted((PACKAGE / "invariants").rglob("*.py"))


def test_the_invariants_import_nothing_from_collector_internals() -> None:
    assert invariant_modules(), "no modules found under invariants/"
    problems = []
    for path in invariant_modules():
        for found in collector_internals(path.read_text(encoding="utf-8"), module_name(path)):
            problems.append(f"{path.relative_to(PACKAGE.parent)}: {found}")
    assert not problems, "the judge must own its rules (see invariants/rules.py):\n" + "\n".join(problems)


def test_the_reference_collector_keeps_its_own_copies_of_the_rules() -> None:
    problems = []
    for name in REFERENCE_COLLECTOR:
        path = PACKAGE / "collector" / name
        for line, target, _ in imported(path.read_text(encoding="utf-8"), module_name(path)):
            if target == RULES or target.startswith(f"{RULES}."):
                problems.append(f"collector/{name}: line {line}: {target}")
    assert not problems, "a rule shared with the judge would hide its own bugs:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "from pytest_rollout_chaos.collector.results import bad_logprob\n",
            ["line 1: pytest_rollout_chaos.collector.results.bad_logprob"],
        ),
        (
            "from pytest_rollout_chaos.collector import failures\n",
            ["line 1: pytest_rollout_chaos.collector.failures"],
        ),
        ("import pytest_rollout_chaos.collector.prefix\n", ["line 1: pytest_rollout_chaos.collector.prefix"]),
        (
            "from ..collector.failures import chain\n",
            ["line 1: pytest_rollout_chaos.collector.failures.chain"],
        ),
        (
            "import pytest_rollout_chaos.collector\n",
            ["line 1: import pytest_rollout_chaos.collector (the whole collector package)"],
        ),
        (
            "def f():\n    from pytest_rollout_chaos.collector.protocol import CollectorSettings\n",
            [
                "line 2: CollectorSettings from pytest_rollout_chaos.collector.protocol "
                "(allowed: Collector, Mode, Rollout, RolloutStatus, Row, Style, Turn, row_index)"
            ],
        ),
        (
            "importlib.import_module('pytest_rollout_chaos.collector.results')\n",
            ["line 1: pytest_rollout_chaos.collector.results"],
        ),
        ("from pytest_rollout_chaos.collector.protocol import Rollout, Turn\n", []),
        ("from ..collector.protocol import Mode\nfrom pytest_rollout_chaos.history import History\n", []),
    ],
    ids=[
        "from-module",
        "from-package",
        "import",
        "relative",
        "package",
        "protocol-check",
        "string",
        "ok",
        "ok-relative",
    ],
)
def test_the_import_check_catches_each_way_in(source: str, expected: list[str]) -> None:
    assert collector_internals(source, "pytest_rollout_chaos.invariants.example") == expected
