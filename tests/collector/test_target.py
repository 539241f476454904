"""Loading ``--rollout-chaos-target``: every way it can be wrong says what and what is valid."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from pytest_rollout_chaos.collector import reference
from pytest_rollout_chaos.collector.target import load_factory, names_a_module, search_last
from pytest_rollout_chaos.errors import CollectorTargetError


def test_reference_and_module_factories_load() -> None:
    assert load_factory("reference") is reference.factory
    assert load_factory("pytest_rollout_chaos.collector.reference:factory") is reference.factory
    assert callable(load_factory("fixtures.collectors.silent_short_count:factory"))


def test_a_py_file_path_loads(tmp_path: Path) -> None:
    module = tmp_path / "my_collector.py"
    module.write_text("def make(ctx):\n    return ctx\n")
    factory = load_factory(f"{module}:make")
    assert factory.__name__ == "make"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "no-colon",
            r"is not valid \(valid: reference, nemo_rl, slime, verl, skyrl, skyrl_skip_failed_rollouts, "
            r"nemo_gym, or MODULE:FACTORY",
        ),
        ("no_such_module_xyz:factory", r"module 'no_such_module_xyz' not found"),
        (
            "pytest_rollout_chaos.collector.reference:nope",
            r"has no attribute 'nope' \(its public callables: ",
        ),
        ("pytest_rollout_chaos.collector.reference:SOURCE", r"'SOURCE' is a str, not callable"),
    ],
)
def test_bad_targets_say_what_is_wrong(target: str, message: str) -> None:
    with pytest.raises(CollectorTargetError, match=message):
        load_factory(target)


def test_wrong_signature_and_missing_file(tmp_path: Path) -> None:
    module = tmp_path / "two_args.py"
    module.write_text("def make(ctx, other):\n    return ctx\n")
    with pytest.raises(CollectorTargetError, match=r"signature \(ctx, other\) cannot be called with one"):
        load_factory(f"{module}:make")
    with pytest.raises(CollectorTargetError, match=r"does not exist"):
        load_factory(f"{tmp_path / 'missing.py'}:make")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('import-time bug')\n")
    with pytest.raises(CollectorTargetError, match=r"importing .* failed: RuntimeError\('import-time bug'\)"):
        load_factory(f"{broken}:make")


def test_a_file_inside_a_package_loads_by_path_with_its_absolute_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.path", list(sys.path))
    package = tmp_path / "chaos_pkg_xyz"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helper.py").write_text("def build(ctx):\n    return ('built', ctx)\n")
    (package / "collector.py").write_text("from chaos_pkg_xyz.helper import build\n\nfactory = build\n")
    factory = load_factory(f"{package / 'collector.py'}:factory")
    assert factory(1) == ("built", 1)  # type: ignore[arg-type, comparison-overlap]
    assert str(tmp_path) in sys.path


def test_known_bug_collectors_load_by_path() -> None:
    path = Path(__file__).resolve().parents[2] / "fixtures" / "collectors" / "silent_short_count.py"
    assert load_factory(f"{path}:factory").__module__ == "fixtures.collectors.silent_short_count"


@pytest.mark.parametrize("adapter", ["nemo_rl", "slime", "verl"])
def test_an_adapter_whose_trainer_is_missing_names_the_module_and_the_install(
    adapter: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_rollout_chaos.collector.adapters import load

    module = importlib.import_module(f"pytest_rollout_chaos.collector.adapters.{adapter}")
    top = module.UPSTREAM.modules[0].split(".")[0]
    monkeypatch.setitem(sys.modules, top, None)  # an import of it now raises ImportError
    with pytest.raises(CollectorTargetError) as caught:
        load(adapter)
    message = str(caught.value)
    assert f"the {adapter} adapter cannot import {module.UPSTREAM.modules[0]!r}" in message
    assert f"install it with: {module.UPSTREAM.install}" in message
    assert "--rollout-chaos-upstream" in message


def test_the_start_folder_is_searched_last_and_taken_off_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the ``pythonpath`` ini's folders and what is installed: it shadows none of them."""
    monkeypatch.setattr("sys.path", [str(tmp_path / "from_ini"), *sys.path])
    before = list(sys.path)
    undo = search_last(tmp_path)
    assert sys.path == [*before, str(tmp_path)]
    assert search_last(tmp_path)() is None  # already there: nothing added, nothing to take off
    assert sys.path == [*before, str(tmp_path)]
    undo()
    assert sys.path == before


@pytest.mark.parametrize(
    ("target", "module"),
    [("chaos:make_collector", True), ("my.chaos:make", True), ("chaos.py:make", False), ("reference", False)],
)
def test_only_a_dotted_module_target_is_searched_for(target: str, module: bool) -> None:
    assert names_a_module(target) is module


def test_a_missing_import_inside_the_target_is_not_the_target_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(tmp_path)
    (tmp_path / "imports_a_missing_xyz.py").write_text("import no_such_dependency_xyz\n")
    failed = r"importing 'imports_a_missing_xyz' failed: No module named 'no_such_dependency_xyz'"
    with pytest.raises(CollectorTargetError, match=failed):
        load_factory("imports_a_missing_xyz:make")
