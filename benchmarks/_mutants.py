"""The project's own small mutator: mutants of Python source, one edit at one site each.

The operators model bugs collectors ship: a comparison flipped (``<`` and ``<=``, ``==`` and
``!=``, ``is``/``in`` and their negations), ``and`` and ``or`` swapped, a ``not`` dropped, a
constant tweaked (``True`` and ``False``; a number plus or minus one, 0 only to 1), a statement
deleted (an awaited or called expression, a ``raise``, a ``continue`` or ``break``), a returned
value turned into ``None``, an ``except`` body turned into ``pass``, a slice bound or a computed
index off by one, and the first two arguments of a call swapped.

A mutant is a text edit at its node's position, so every other line and column stays as it was
(line numbers in tracebacks and coverage still match the original). Each edit is checked: the
edited text is parsed and its tree must equal the original tree with just that node mutated; a
mutant whose text would say anything else is not produced (``Mutants.unrendered``).

Not mutated: imports, annotations, f-strings (message text), ``if TYPE_CHECKING:`` blocks, and
calls to ``<...>history.append``: a collector's own History events are for the story only, no
invariant reads them (ARCHITECTURE.md, "The History"), so deleting one changes no verdict.
"""

from __future__ import annotations

import ast
import bisect
import copy
import re
from dataclasses import dataclass, field

_COMPARE_FLIPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], str]] = {
    ast.Lt: (ast.LtE, "<="),
    ast.LtE: (ast.Lt, "<"),
    ast.Gt: (ast.GtE, ">="),
    ast.GtE: (ast.Gt, ">"),
    ast.Eq: (ast.NotEq, "!="),
    ast.NotEq: (ast.Eq, "=="),
    ast.Is: (ast.IsNot, "is not"),
    ast.IsNot: (ast.Is, "is"),
    ast.In: (ast.NotIn, "not in"),
    ast.NotIn: (ast.In, "in"),
}
_COMPARE_TOKEN = re.compile(r"is\s+not\b|not\s+in\b|<=|>=|==|!=|<|>|\bis\b|\bin\b")
_BOOL_TOKEN = re.compile(r"\b(?:and|or)\b")
# Swapping these arguments is a TypeError on the first call, never a quiet bug.
_NO_SWAP = frozenset({"isinstance", "issubclass", "getattr", "hasattr", "setattr"})
_SNIPPET_CHARS = 60
# Types, and decorators (``@dataclass(slots=True)``): what the code is, not what it does.
_NOT_WALKED = frozenset({"annotation", "returns", "type_comment", "decorator_list"})
_NOT = re.compile(r"not\b\s*")


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``source[start:end]`` (character offsets) with ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class Mutant:
    """One mutation: where (``path:line:col``, col 1-based), which operator, the edits it makes, and
    ``lines``: the first and last line whose running means the mutated code may have run."""

    path: str
    line: int
    col: int
    operator: str
    description: str
    edits: tuple[Edit, ...]
    lines: tuple[int, int]

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}:{self.col}:{self.operator}"

    def apply(self, source: str) -> str:
        """The mutated source."""
        text = source
        for edit in sorted(self.edits, key=lambda edit: edit.start, reverse=True):
            text = text[: edit.start] + edit.text + text[edit.end :]
        return text


@dataclass(slots=True)
class Mutants:
    """Every mutant of one file, in source order, and the ids of those whose text could not be made."""

    mutants: list[Mutant] = field(default_factory=list)
    unrendered: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Slot:
    """Where a node hangs: ``parent.name`` or ``parent.name[index]``."""

    parent: ast.AST
    name: str
    index: int | None

    def get(self) -> ast.AST:
        value = getattr(self.parent, self.name)
        return value if self.index is None else value[self.index]  # type: ignore[no-any-return]

    def put(self, node: ast.AST) -> None:
        if self.index is None:
            setattr(self.parent, self.name, node)
        else:
            getattr(self.parent, self.name)[self.index] = node


def mutants_of(path: str, source: str) -> Mutants:
    """Every mutant of ``source`` (named ``path`` in ids), each verified against the tree."""
    return _Mutator(path, source).run()


class _Mutator:
    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source
        self.tree = ast.parse(source)
        self.expected_dump = ast.dump(self.tree)
        self._line_starts = [0]
        for line in source.splitlines(keepends=True):
            self._line_starts.append(self._line_starts[-1] + len(line))
        self._lines = source.splitlines(keepends=True)
        self.found = Mutants()
        self._ids: set[str] = set()
        self._statement_line = 1  # the first line of the innermost statement being walked

    def run(self) -> Mutants:
        self._body(self.tree, "body")
        self.found.mutants.sort(key=lambda mutant: (mutant.line, mutant.col, mutant.operator))
        return self.found

    # --- walking: which nodes are looked at, and where each hangs

    def _body(self, parent: ast.AST, name: str) -> None:
        for index, statement in enumerate(getattr(parent, name)):
            self._statement(statement, _Slot(parent, name, index))

    def _statement(self, node: ast.stmt, slot: _Slot) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom) or _is_type_checking(node):
            return
        if isinstance(node, ast.Expr) and _is_history_append(node.value):
            return
        self._statement_line = node.lineno
        self._statement_mutants(node, slot)
        for name, value in ast.iter_fields(node):
            if name in _NOT_WALKED:
                continue
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self._body(node, name)
            elif name == "handlers":
                for index, handler in enumerate(value):
                    self._handler(handler, _Slot(node, name, index))
            else:
                self._statement_line = node.lineno
                self._children(node, name, value)

    def _handler(self, handler: ast.ExceptHandler, slot: _Slot) -> None:
        if not (len(handler.body) == 1 and _deleted_alone(handler.body[0])):
            replaced = copy.copy(handler)
            replaced.body = [ast.Pass()]
            edit = self._replace_statements(handler.body, "pass")
            change = "except body -> pass"
            self._emit(handler, slot, "except_pass", change, to=replaced, edits=(edit,), site=handler.body[0])
        if handler.type is not None:
            self._statement_line = handler.lineno
            self._expression(handler.type, _Slot(handler, "type", None))
        self._body(handler, "body")

    def _children(self, parent: ast.AST, name: str, value: object) -> None:
        if isinstance(value, ast.expr):
            self._expression(value, _Slot(parent, name, None))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, ast.expr):
                    self._expression(item, _Slot(parent, name, index))
                elif isinstance(item, ast.AST):
                    for child_name, child in ast.iter_fields(item):
                        if child_name != "annotation":
                            self._children(item, child_name, child)
        elif isinstance(value, ast.AST):  # arguments, comprehension, keyword, withitem, match_case
            for child_name, child in ast.iter_fields(value):
                if child_name != "annotation":
                    self._children(value, child_name, child)

    def _expression(self, node: ast.expr, slot: _Slot) -> None:
        if isinstance(node, ast.JoinedStr) or _is_history_append(node):
            return
        self._expression_mutants(node, slot)
        for name, value in ast.iter_fields(node):
            if isinstance(node, ast.Lambda) and name == "args":
                continue
            self._children(node, name, value)

    # --- the operators

    def _statement_mutants(self, node: ast.stmt, slot: _Slot) -> None:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call | ast.Await):
            what = "await" if isinstance(node.value, ast.Await) else "call"
            edit = self._replace_statements([node], "pass")
            self._emit(node, slot, "stmt_del", f"{what} deleted", to=ast.Pass(), edits=(edit,))
        elif isinstance(node, ast.Raise):
            edit = self._replace_statements([node], "pass")
            self._emit(node, slot, "raise_del", "raise deleted", to=ast.Pass(), edits=(edit,))
        elif isinstance(node, ast.Continue | ast.Break):
            word = "continue" if isinstance(node, ast.Continue) else "break"
            edit = self._replace_statements([node], "pass")
            self._emit(node, slot, f"{word}_del", f"{word} deleted", to=ast.Pass(), edits=(edit,))
        elif isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
            edit = self._replace_expression(node.value, "None")
            replaced = ast.Return(value=ast.Constant(value=None))
            self._emit(node, slot, "return_none", "returns None", to=replaced, edits=(edit,), site=node.value)

    def _expression_mutants(self, node: ast.expr, slot: _Slot) -> None:
        if isinstance(node, ast.Compare):
            self._compare(node, slot)
        elif isinstance(node, ast.BoolOp):
            self._bool_op(node, slot)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            keyword = _NOT.match(self.source, self._start(node))
            if keyword is None:
                return
            edit = Edit(keyword.start(), keyword.end(), "")
            self._emit(node, slot, "not_del", "`not` dropped", to=node.operand, edits=(edit,))
        elif isinstance(node, ast.Constant):
            self._constant(node, slot)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            self._subscript(node, slot)
        elif isinstance(node, ast.Call):
            self._call(node, slot)

    def _compare(self, node: ast.Compare, slot: _Slot) -> None:
        operands = [node.left, *node.comparators]
        for position, op in enumerate(node.ops):
            flipped, new_text = _COMPARE_FLIPS[type(op)]
            gap = self._end(operands[position]), self._start(operands[position + 1])
            token = self._token(*gap, _COMPARE_TOKEN)
            if token is None:
                continue
            replaced = copy.copy(node)
            replaced.ops = [*node.ops]
            replaced.ops[position] = flipped()
            old_text = " ".join(token[2].split())
            edit = Edit(token[0], token[1], new_text)
            suffix = "" if position == 0 else str(position + 1)
            change = f"`{old_text}` -> `{new_text}`"
            self._emit(node, slot, f"cmp_flip{suffix}", change, to=replaced, edits=(edit,), at=token[0])

    def _bool_op(self, node: ast.BoolOp, slot: _Slot) -> None:
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        edits = []
        for left, right in zip(node.values, node.values[1:], strict=False):
            token = self._token(self._end(left), self._start(right), _BOOL_TOKEN)
            if token is None:
                return
            edits.append(Edit(token[0], token[1], new))
        replaced = copy.copy(node)
        replaced.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        change = f"`{old}` -> `{new}`"
        self._emit(node, slot, "bool_swap", change, to=replaced, edits=tuple(edits), at=edits[0].start)

    def _constant(self, node: ast.Constant, slot: _Slot) -> None:
        value = node.value
        if isinstance(value, bool):
            edit = Edit(self._start(node), self._end(node), repr(not value))
            flipped = ast.Constant(not value)
            self._emit(node, slot, "bool_flip", f"`{value}` -> `{not value}`", to=flipped, edits=(edit,))
            return
        if not isinstance(value, int | float) or isinstance(value, complex):
            return
        changes = [("const_inc", value + 1)] + ([("const_dec", value - 1)] if value != 0 else [])
        for operator, new in changes:
            edit = Edit(self._start(node), self._end(node), repr(new))
            tweaked = ast.parse(repr(new), mode="eval").body  # a negative number is ``-`` and a constant
            self._emit(node, slot, operator, f"`{value!r}` -> `{new!r}`", to=tweaked, edits=(edit,))

    def _subscript(self, node: ast.Subscript, slot: _Slot) -> None:
        index = node.slice
        if isinstance(index, ast.Slice):
            for bound in ("lower", "upper"):
                value = getattr(index, bound)
                if value is None or isinstance(value, ast.Constant) or _is_negative_constant(value):
                    continue  # a literal bound gets the constant operators
                replaced_slice = copy.copy(index)
                setattr(replaced_slice, bound, _plus_one(value))
                replaced = copy.copy(node)
                replaced.slice = replaced_slice
                edit = self._replace_expression(value, f"({self._text(value)}) + 1", wrap=False)
                change = f"slice {bound} bound + 1"
                self._emit(node, slot, f"slice_{bound}", change, to=replaced, edits=(edit,), site=value)
        elif not isinstance(index, ast.Constant | ast.Tuple) and not _is_negative_constant(index):
            replaced = copy.copy(node)
            replaced.slice = _plus_one(index)
            edit = self._replace_expression(index, f"({self._text(index)}) + 1", wrap=False)
            self._emit(node, slot, "index_off", "index + 1", to=replaced, edits=(edit,), site=index)

    def _call(self, node: ast.Call, slot: _Slot) -> None:
        if len(node.args) < 2 or any(isinstance(arg, ast.Starred) for arg in node.args[:2]):
            return
        if isinstance(node.func, ast.Name) and node.func.id in _NO_SWAP:
            return
        first, second = node.args[0], node.args[1]
        if self._text(first) == self._text(second):
            return
        replaced = copy.copy(node)
        replaced.args = [second, first, *node.args[2:]]
        edits = (
            Edit(self._start(first), self._end(first), self._text(second)),
            Edit(self._start(second), self._end(second), self._text(first)),
        )
        change = "first two arguments swapped"
        self._emit(node, slot, "arg_swap", change, to=replaced, edits=edits, site=first)

    # --- making and checking one mutant

    def _emit(
        self,
        node: ast.AST,
        slot: _Slot,
        operator: str,
        change: str,
        *,
        to: ast.AST,
        edits: tuple[Edit, ...],
        site: ast.AST | None = None,
        at: int | None = None,
    ) -> None:
        at = self._start(site if site is not None else node) if at is None else at
        line = bisect.bisect_right(self._line_starts, at)
        col = at - self._line_starts[line - 1] + 1
        snippet = self._lines[line - 1].strip()
        if len(snippet) > _SNIPPET_CHARS:
            snippet = snippet[: _SNIPPET_CHARS - 3] + "..."
        first = node.lineno if isinstance(node, ast.stmt | ast.excepthandler) else self._statement_line
        lines = (min(first, line), max(line, node.end_lineno or line))  # type: ignore[attr-defined]
        operator_id = operator
        while f"{self.path}:{line}:{col}:{operator_id}" in self._ids:  # ``f(a, b)(c, d)``: one column
            operator_id += "'"
        mutant = Mutant(self.path, line, col, operator_id, f"{change} in `{snippet}`", edits, lines)
        self._ids.add(mutant.id)
        if self._renders(slot, to, mutant):
            self.found.mutants.append(mutant)
        else:
            self.found.unrendered.append(mutant.id)

    def _renders(self, slot: _Slot, replacement: ast.AST, mutant: Mutant) -> bool:
        """Whether the mutant's text parses to exactly the original tree with ``replacement`` put in."""
        original = slot.get()
        slot.put(replacement)
        try:
            expected = ast.dump(self.tree)
        finally:
            slot.put(original)
        try:
            got = ast.dump(ast.parse(mutant.apply(self.source)))
        except SyntaxError:
            return False
        return got == expected

    # --- positions and text

    def _offset(self, line: int, byte_col: int) -> int:
        text = self._lines[line - 1] if line <= len(self._lines) else ""
        return self._line_starts[line - 1] + len(text.encode()[:byte_col].decode(errors="replace"))

    def _start(self, node: ast.AST) -> int:
        return self._offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def _end(self, node: ast.AST) -> int:
        return self._offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def _text(self, node: ast.AST) -> str:
        return self.source[self._start(node) : self._end(node)]

    def _token(self, start: int, end: int, pattern: re.Pattern[str]) -> tuple[int, int, str] | None:
        """The first ``pattern`` match in ``source[start:end]`` outside a comment."""
        gap = self.source[start:end]
        for match in pattern.finditer(gap):
            line_start = gap.rfind("\n", 0, match.start()) + 1
            if "#" not in gap[line_start : match.start()]:
                return start + match.start(), start + match.end(), match.group()
        return None

    def _replace_statements(self, statements: list[ast.stmt], text: str) -> Edit:
        """Replace whole statements with ``text``, keeping their line count (blank lines after it)."""
        start, end = self._start(statements[0]), self._end(statements[-1])
        return Edit(start, end, text + "\n" * self.source.count("\n", start, end))

    def _replace_expression(self, node: ast.expr, text: str, *, wrap: bool = True) -> Edit:
        """Replace an expression, keeping its line count (inside parentheses when it spans lines)."""
        start, end = self._start(node), self._end(node)
        newlines = self.source.count("\n", start, end) - text.count("\n")
        if newlines > 0 and wrap:
            text = f"({text}{chr(10) * newlines})"
        return Edit(start, end, text)


def _deleted_alone(statement: ast.stmt) -> bool:
    """A handler body of this one statement is ``pass`` already, or becomes ``pass`` under another
    operator (``stmt_del``, ``raise_del``, ``continue_del``, ``break_del``): ``except_pass`` would
    repeat that mutant."""
    if isinstance(statement, ast.Expr):
        return isinstance(statement.value, ast.Call | ast.Await) or _is_history_append(statement.value)
    return isinstance(statement, ast.Pass | ast.Raise | ast.Continue | ast.Break)


def _plus_one(node: ast.expr) -> ast.expr:
    return ast.BinOp(left=node, op=ast.Add(), right=ast.Constant(1))


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_negative_constant(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
    )


def _is_history_append(node: ast.expr) -> bool:
    """``history.append(...)`` or ``<...>.history.append(...)``: the collector's own story events."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    owner = node.func.value
    if node.func.attr != "append":
        return False
    return (isinstance(owner, ast.Name) and owner.id == "history") or (
        isinstance(owner, ast.Attribute) and owner.attr == "history"
    )


def _is_type_checking(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )
