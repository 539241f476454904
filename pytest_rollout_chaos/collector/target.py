"""Loading the collector under test named by ``--rollout-chaos-target``.

``reference`` is the built-in collector; ``MODULE:FACTORY`` imports a module (dotted name, or a
``.py`` file path) and takes a callable ``factory(ctx) -> Collector`` from it. Every way this can
go wrong is a ``CollectorTargetError`` that says what was wrong and what is valid.

A dotted name is imported from ``sys.path``; the runner first adds the folder it was started in,
last (``search_last``), so a target next to the user does not depend on how pytest was started
(``python -m pytest`` puts that folder first, the ``pytest`` script does not) or on where the
scenario files lie (pytest takes its rootdir and ``pythonpath`` ini from the paths it is given).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Final, cast

from pytest_rollout_chaos import targets
from pytest_rollout_chaos.collector import adapters
from pytest_rollout_chaos.collector.protocol import CollectorFactory
from pytest_rollout_chaos.errors import CollectorTargetError

VALID: Final = targets.valid_targets()


def load_factory(target: str) -> CollectorFactory:
    """The factory ``target`` names; raise ``CollectorTargetError`` saying what is wrong."""
    if target == targets.REFERENCE:
        from pytest_rollout_chaos.collector import reference

        return reference.factory
    if targets.is_adapter(target):
        return adapters.load(target)
    module_name, sep, attribute = target.rpartition(":")
    if not sep or not module_name or not attribute:
        raise CollectorTargetError(f"target {target!r} is not valid (valid: {VALID})")
    module = _import(module_name, target)
    if not hasattr(module, attribute):
        public = sorted(
            name for name in vars(module) if callable(getattr(module, name)) and not name.startswith("_")
        )
        raise CollectorTargetError(
            f"target {target!r}: module {module_name!r} has no attribute {attribute!r} "
            f"(its public callables: {', '.join(public) or 'none'})"
        )
    factory = getattr(module, attribute)
    if not callable(factory):
        raise CollectorTargetError(
            f"target {target!r}: {attribute!r} is a {type(factory).__name__}, not callable "
            "(valid: a function factory(ctx: CollectorContext) -> Collector)"
        )
    _check_is_a_factory(factory, attribute, target)
    _check_signature(factory, target)
    return cast(CollectorFactory, factory)


def names_a_module(target: str) -> bool:
    """Whether ``target`` is ``MODULE:FACTORY`` with a dotted module name (not a file, not built in)."""
    module_name, sep, _ = target.rpartition(":")
    return bool(sep and module_name) and not targets.is_builtin(target) and not module_name.endswith(".py")


def search_last(folder: Path) -> Callable[[], None]:
    """Put ``folder`` at the end of ``sys.path`` unless it is on it: after the ``pythonpath`` ini's
    folders and the installed packages, so it shadows none of them. Returns what undoes it."""
    entry = str(folder)
    if entry in sys.path:
        return lambda: None
    sys.path.append(entry)

    def undo() -> None:
        if entry in sys.path:
            sys.path.remove(entry)

    return undo


def _import(module_name: str, target: str) -> ModuleType:
    if module_name.endswith(".py"):
        path = Path(module_name).expanduser().resolve()
        if not path.is_file():
            raise CollectorTargetError(f"target {target!r}: file {str(path)!r} does not exist")
        dotted = _dotted_name(path)
        if dotted is not None:
            return _import(dotted, target)
        spec = importlib.util.spec_from_file_location(f"rollout_chaos_target_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise CollectorTargetError(f"target {target!r}: {str(path)!r} cannot be imported as a module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            sys.modules.pop(spec.name, None)
            raise CollectorTargetError(
                f"target {target!r}: importing {str(path)!r} failed: {error!r}"
            ) from error
        return module
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and not _names_part_of(error.name, module_name):  # an import inside it
            raise CollectorTargetError(
                f"target {target!r}: importing {module_name!r} failed: {error}"
            ) from error
        raise CollectorTargetError(
            f"target {target!r}: module {module_name!r} not found ({error}); looked for on sys.path, "
            "then in the current folder: is it installed, or is its folder on sys.path (pytest "
            "'pythonpath' ini)? A file can be named by its path instead: FILE.py:FACTORY"
        ) from error
    except Exception as error:
        raise CollectorTargetError(
            f"target {target!r}: importing {module_name!r} failed: {error!r}"
        ) from error


def _names_part_of(missing: str, module_name: str) -> bool:
    """Whether the module Python could not find is ``module_name`` or one of its packages."""
    return module_name == missing or module_name.startswith(f"{missing}.")


def _dotted_name(path: Path) -> str | None:
    """``pkg.sub.mod`` for a file inside packages, with the packages' root put on ``sys.path``.

    So a collector file that imports its sibling modules absolutely loads by path too.
    """
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    if len(parts) == 1:
        return None
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return ".".join(parts)


def _check_is_a_factory(factory: object, attribute: str, target: str) -> None:
    """The two mistakes a signature check lets through: the collect method, a class without one."""
    if inspect.iscoroutinefunction(factory):
        raise CollectorTargetError(
            f"target {target!r}: {attribute!r} is an async function; the target is the factory that "
            "builds the collector (def make_collector(ctx) -> Collector), not its collect method"
        )
    if isinstance(factory, type) and not callable(getattr(factory, "collect", None)):
        raise CollectorTargetError(
            f"target {target!r}: class {attribute!r} has no collect method "
            "(valid: a class with async def collect(self, rows, *, mode), or a factory function)"
        )


def _check_signature(factory: object, target: str) -> None:
    try:
        signature = inspect.signature(factory)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return  # builtins without a signature: trust them
    try:
        signature.bind(object())
    except TypeError as error:
        raise CollectorTargetError(
            f"target {target!r}: factory signature {signature} cannot be called with one "
            f"CollectorContext ({error}); valid: factory(ctx: CollectorContext) -> Collector"
        ) from error
