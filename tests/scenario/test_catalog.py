"""Every built-in scenario validates, is named after its file, and cites its upstream reference."""

from __future__ import annotations

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.scenario import ScenarioFileError, load_scenario


def test_every_catalog_file_is_valid_named_after_its_file_and_cites_upstream() -> None:
    problems: list[str] = []
    names: dict[str, str] = {}
    for path in sorted(bundled.catalog_dir().rglob("*.chaos.yaml")):
        try:
            scenario = load_scenario(path)
        except ScenarioFileError as exc:
            problems.extend(str(problem) for problem in exc.problems)
            continue
        if path.name != f"{scenario.name}.chaos.yaml":
            problems.append(f"{path}:{scenario.line}: name: {scenario.name!r} differs from the file name")
        if not scenario.upstream:
            problems.append(f"{path}:1: upstream: the catalog cites an upstream reference for every scenario")
        if scenario.name in names:
            problems.append(
                f"{path}:{scenario.line}: name: {scenario.name!r} is also used by {names[scenario.name]}"
            )
        names[scenario.name] = str(path)
    assert not problems, "\n".join(problems)
