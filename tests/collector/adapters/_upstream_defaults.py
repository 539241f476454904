"""Upstream's own defaults, read from a pinned tree's source (``ast``, nothing imported).

A setting's default in a trainer's code takes one of a few shapes; ``code_defaults`` collects the
literal values each name gets in them, so a test can hold an adapter's "upstream default" against
the tree itself:

- ``config.get("name", DEFAULT)`` / ``config.pop("name", DEFAULT)`` (``.get("name")``: None);
- ``getattr(args, "name", DEFAULT)``;
- ``config["name"] = LITERAL`` (what upstream's own setup writes);
- ``name: type = DEFAULT`` in a class body (a dataclass or config class);
- ``parser.add_argument("--the-name", ..., default=DEFAULT)`` (``action="store_true"``: False).

``config_keys`` lists the keys upstream's config classes declare: a setting the run fixes
must be one of them (a key upstream reads and has no default for), not a name the adapter made up.
"""

from __future__ import annotations

import ast
import functools
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_NONE = object()


def code_defaults(tree: Path, package: str) -> dict[str, list[Any]]:
    """Every literal default each setting name has in ``tree/package``'s Python files."""
    found: dict[str, list[Any]] = {}
    for module in _modules(tree / package):
        for name, value in _defaults(module):
            found.setdefault(name, []).append(value)
    return found


def get_default(path: Path, name: str) -> list[Any]:
    """The literal defaults ``path`` (one file) gives ``name`` with ``.get``/``.pop``, in source order."""
    module = _parsed(path)
    calls = [
        node
        for node in ast.walk(module)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("get", "pop")
    ]
    calls.sort(key=lambda node: (node.lineno, node.col_offset))
    return [value for call in calls for key, value in _call_default(call) if key == name]


def attributes_read(tree: Path, package: str, owner: str) -> set[str]:
    """Every ``owner.NAME`` (``args.rollout_seed``) and ``getattr(owner, "NAME", ...)`` the package reads."""
    names: set[str] = set()
    for module in _modules(tree / package):
        for node in ast.walk(module):
            if isinstance(node, ast.Attribute) and _name(node.value) == owner:
                names.add(node.attr)
            elif (
                isinstance(node, ast.Call)
                and _name(node.func) == "getattr"
                and len(node.args) >= 2
                and _name(node.args[0]) == owner
                and isinstance(name := _literal(node.args[1]), str)
            ):
                names.add(name)
    return names


CONFIG_BASES = ("TypedDict", "BaseModel")
"""What upstream's config classes derive from: ``TypedDict``, or pydantic's ``BaseModel`` (NeMo RL
after #3000)."""


def config_keys(tree: Path, package: str) -> set[str]:
    """The field names of every config class (``CONFIG_BASES``) in ``tree/package``."""
    keys: set[str] = set()
    for module in _modules(tree / package):
        for node in ast.walk(module):
            if isinstance(node, ast.ClassDef) and any(_name(base) in CONFIG_BASES for base in node.bases):
                keys |= {
                    item.target.id
                    for item in node.body
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                }
    return keys


@functools.cache
def _parsed(path: Path) -> ast.Module:
    # An invalid escape in upstream's strings warns (DeprecationWarning on 3.11, SyntaxWarning
    # later), which the suite's filters make an error.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _modules(root: Path) -> Iterator[ast.Module]:
    paths = sorted(root.rglob("*.py"))
    if not paths:
        raise AssertionError(f"no Python files under {root}")
    for path in paths:
        yield _parsed(path)


def _defaults(module: ast.Module) -> Iterator[tuple[str, Any]]:
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            yield from _call_default(node)
        elif isinstance(node, ast.Call) and _name(node.func) == "reset_arg" and len(node.args) >= 2:
            # slime's reset_arg(parser, "--name", ...): Megatron's argument declared again, slime's default
            redeclared = ast.Call(ast.Attribute(node.args[0], "add_argument"), node.args[1:], node.keywords)
            yield from _call_default(redeclared)
        elif isinstance(node, ast.Call) and _name(node.func) == "getattr" and len(node.args) == 3:
            name, value = _literal(node.args[1]), _literal(node.args[2])
            if isinstance(name, str) and value is not _NONE:
                yield name, value
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                key = _subscript_key(target)
                value = _literal(node.value)
                if key is not None and value is not _NONE:
                    yield key, value
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value:
                    value = _literal(item.value)
                    if value is not _NONE:
                        yield item.target.id, value


def _call_default(node: ast.Call) -> Iterator[tuple[str, Any]]:
    method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
    first = _literal(node.args[0]) if node.args else _NONE
    if method in ("get", "pop") and isinstance(first, str) and len(node.args) <= 2:
        value = _literal(node.args[1]) if len(node.args) == 2 else None
        if value is not _NONE:
            yield first, value
    elif method == "add_argument" and isinstance(first, str) and first.startswith("--"):
        keywords = {keyword.arg: keyword.value for keyword in node.keywords}
        dest = _literal(keywords["dest"]) if "dest" in keywords else _NONE
        name = dest if isinstance(dest, str) else first.removeprefix("--").replace("-", "_")
        action = _literal(keywords["action"]) if "action" in keywords else _NONE
        if "default" in keywords:
            value = _literal(keywords["default"])
            if value is not _NONE:
                yield name, value
        elif action in ("store_true", "store_false"):
            yield name, action == "store_false"  # argparse's default for a switch
        else:
            yield name, None


def _subscript_key(target: ast.expr) -> str | None:
    if isinstance(target, ast.Subscript):
        key = _literal(target.slice)
        return key if isinstance(key, str) else None
    return None


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NONE


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""
