"""The data that ships with the plugin: the built-in scenarios are found by name."""

from __future__ import annotations

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.scenario.model import load_scenario


def test_each_catalog_file_is_named_after_its_scenario() -> None:
    """``--rollout-chaos-scenario`` and the gate find a built-in scenario by its file's name."""
    files = bundled.catalog_files()
    assert len(files) >= 16
    assert {name: load_scenario(path).name for name, path in files.items()} == {name: name for name in files}
    assert list(files) == sorted(files)
