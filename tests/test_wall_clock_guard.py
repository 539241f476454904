"""No wall-clock asserts tighter than a busy machine allows in the fast loop.

Tests not marked ``slow`` run on shared two-core machines beside everything else, so an assert on
elapsed wall time must leave room: a window ``low <= elapsed <= high`` needs ``high >= 5 * low``,
a bound alone must be at least ``MIN_UPPER_S``, and ``pytest.approx`` or ``==`` on a wall-clock
measurement is never allowed. Exact timings (a latency toxic's 250 ms within 20 %) are measured
in ``benchmarks/toxics.py``, which prints them. Slow tests are left alone: there a deadline is
asserted only where meeting it is the point of the test.

The check is syntactic. A wall-clock measurement is a call of ``time.monotonic``,
``time.perf_counter`` or ``time.time``, a call of a helper named ``*_s`` (``roundtrip_s``), or a
name assigned from one of those in the same test (loop variables over such a name included).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

TESTS: Final = Path(__file__).resolve().parent
RATIO: Final = 5.0
MIN_UPPER_S: Final = 0.25
CLOCKS: Final = frozenset({"monotonic", "perf_counter", "time"})
_LOWER: Final = (ast.Gt, ast.GtE)  # elapsed > x: x is a lower bound
_UPPER: Final = (ast.Lt, ast.LtE)
_ARITHMETIC: Final[dict[type[ast.operator], Callable[[float, float], float]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


@dataclass(frozen=True, slots=True)
class Problem:
    where: str
    assertion: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}: assert {self.assertion}: {self.why}"


def _is_clock(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    if name.endswith("_s"):
        return True
    return name in CLOCKS and (
        isinstance(function, ast.Name) or ast.unparse(function).startswith(("time.", "loop."))
    )


def _timed(node: ast.AST, names: set[str]) -> bool:
    return any(
        _is_clock(child) or (isinstance(child, ast.Name) and child.id in names) for child in ast.walk(node)
    )


def _timed_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names the test binds to wall-clock measurements, to a fixed point."""
    names: set[str] = set()
    while True:
        before = len(names)
        for node in ast.walk(function):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if _timed(node.value, names):
                    names |= {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension) and _timed(node.iter, names):
                names |= {t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)}
        if len(names) == before:
            return names


def _number(node: ast.AST) -> float | None:
    """``node``'s value when it is plain arithmetic on numbers, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _number(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _number(node.left), _number(node.right)
        if left is None or right is None:
            return None
        return _ARITHMETIC[type(node.op)](left, right)
    return None


def _check_assert(test: ast.expr, names: set[str]) -> str | None:
    """Why ``test`` asserts wall time too tightly, or None."""
    for compare in (node for node in ast.walk(test) if isinstance(node, ast.Compare)):
        operands = [compare.left, *compare.comparators]
        lower: list[float] = []
        upper: list[float | None] = []
        for op, left, right in zip(compare.ops, operands[:-1], operands[1:], strict=True):
            left_timed, right_timed = _timed(left, names), _timed(right, names)
            if left_timed == right_timed:
                continue
            bound, timed_on_left = (right, True) if left_timed else (left, False)
            if isinstance(bound, ast.Call) and ast.unparse(bound.func).endswith("approx"):
                return "pytest.approx on wall time; assert bounds (at least the nominal, at most 5x)"
            if isinstance(op, ast.Eq | ast.NotEq):
                return "== on wall time; assert bounds (at least the nominal, at most 5x)"
            if not isinstance(op, _LOWER + _UPPER):
                continue
            is_upper = isinstance(op, _UPPER) == timed_on_left
            value = _number(bound)
            if is_upper:
                upper.append(value)
            elif value is not None:
                lower.append(value)
        for high in upper:
            if high is None:
                return "an upper bound that is not a number; write it as one, so it can be checked"
            low = max(lower, default=0.0)
            if low > 0 and high < RATIO * low:
                return f"the window {low:g}..{high:g} s is tighter than {RATIO:g}x; allow {RATIO * low:g} s"
            if low <= 0 and high < MIN_UPPER_S:
                return f"an upper bound of {high:g} s; a busy machine needs at least {MIN_UPPER_S:g} s"
    return None


def _is_slow(decorators: list[ast.expr]) -> bool:
    return any(
        isinstance(node, ast.Attribute) and node.attr == "slow"
        for decorator in decorators
        for node in ast.walk(decorator)
    )


def _module_slow(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets)
        and _is_slow([node.value])
        for node in tree.body
    )


def _fast_tests(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    if _module_slow(tree):
        return
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not _is_slow(node.decorator_list):
            members = [m for m in node.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            members = [node]
        else:
            continue
        yield from (m for m in members if m.name.startswith("test") and not _is_slow(m.decorator_list))


def problems(path: Path, source: str) -> list[Problem]:
    """Every wall-clock assert in the fast tests of ``source`` that is tighter than the rule allows."""
    found = []
    for function in _fast_tests(ast.parse(source)):
        names = _timed_names(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Assert) and (why := _check_assert(node.test, names)):
                found.append(Problem(f"{path}:{node.lineno}", ast.unparse(node.test), why))
    return found


def test_no_fast_test_asserts_wall_time_tighter_than_a_busy_machine_allows() -> None:
    found = [
        str(problem)
        for path in sorted(TESTS.rglob("*.py"))
        for problem in problems(path.relative_to(TESTS.parent), path.read_text(encoding="utf-8"))
    ]
    assert not found, "wall-clock asserts too tight for the fast loop:\n" + "\n".join(found)


GOOD = """
import time, pytest

pytestmark = pytest.mark.asyncio

async def test_ok(client):
    started = time.monotonic()
    took_s = time.monotonic() - started
    assert took_s >= 0.3
    assert 0.3 <= took_s <= 1.5
    assert await client.roundtrip_s() < 0.25
    assert len([1]) == 1

@pytest.mark.slow
def test_slow_may_be_exact():
    started = time.monotonic()
    assert time.monotonic() - started == pytest.approx(0.3, rel=0.2)
"""

BAD = """
import time, pytest

async def test_approx():
    started = time.monotonic()
    took_s = time.monotonic() - started
    assert took_s == pytest.approx(0.3, rel=0.2)

async def test_window(client):
    assert 0.3 <= await client.roundtrip_s() <= 0.36

def test_loop(client):
    slowed = [client.roundtrip_s() for _ in range(2)]
    for rtt in slowed:
        assert rtt < 0.05

def test_unknown(limit_ms):
    elapsed = time.perf_counter()
    assert elapsed <= limit_ms / 1000 * 1.2
"""


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (GOOD, []),
        (
            BAD,
            [
                "x.py:7: assert took_s == pytest.approx(0.3, rel=0.2): pytest.approx on wall time",
                "x.py:10: assert 0.3 <= await client.roundtrip_s() <= 0.36: the window 0.3..0.36 s",
                "x.py:15: assert rtt < 0.05: an upper bound of 0.05 s",
                "x.py:19: assert elapsed <= limit_ms / 1000 * 1.2: an upper bound that is not a number",
            ],
        ),
    ],
    ids=["allowed", "caught"],
)
def test_the_guard_tells_tight_wall_clock_asserts_from_loose_ones(source: str, expected: list[str]) -> None:
    found = [str(problem) for problem in problems(Path("x.py"), source)]
    assert len(found) == len(expected), found
    for line, start in zip(found, expected, strict=True):
        assert line.startswith(start), line
