"""``pytest --rollout-chaos`` without paths runs the built-in catalog next to the project's own
scenarios; naming paths, the ini switch, or enabling through ini alone leave it out."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos import bundled

OWN_SCENARIO = """\
name: our-own
description: the project's own scenario
upstream: ["example/repo#1"]
expect:
  invariants: [accounted]
  witness: {rows_answered: 1}
"""
BUILTIN = sorted(path.name.removesuffix(".chaos.yaml") for path in bundled.catalog_dir().glob("*.chaos.yaml"))


def _collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", *args)
    return [line for line in result.outlines if "::" in line]


def test_flag_without_paths_adds_the_builtin_catalog(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makefile(".chaos.yaml", ours=OWN_SCENARIO)
    items = _collected(pytester, "--rollout-chaos")
    assert any(item.endswith("::our-own") for item in items)
    names = sorted(item.rsplit("::", 1)[1] for item in items if "ours.chaos.yaml" not in item)
    assert names == BUILTIN
    assert len(BUILTIN) >= 16


@pytest.mark.parametrize(
    ("ini", "args"),
    [
        ("", ("--rollout-chaos", "ours.chaos.yaml")),  # paths named: just these
        ("rollout_chaos_catalog = false\n", ("--rollout-chaos",)),  # switched off
        ("rollout_chaos = true\n", ()),  # enabled through ini only: the suite stays as it is
    ],
    ids=["paths-named", "ini-switch", "ini-enabled"],
)
def test_builtin_catalog_left_out(pytester: pytest.Pytester, ini: str, args: tuple[str, ...]) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n" + ini)
    pytester.makefile(".chaos.yaml", ours=OWN_SCENARIO)
    items = _collected(pytester, *args)
    assert [item.rsplit("::", 1)[1] for item in items] == ["our-own"]


def test_builtin_scenarios_are_named_without_their_path(pytester: pytest.Pytester) -> None:
    """``--rollout-chaos-scenario`` needs no path into the installed package: alone it collects just
    those, beside named paths it adds them, and its ini twin does the same."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makefile(".chaos.yaml", ours=OWN_SCENARIO)
    named = "--rollout-chaos-scenario=retokenization-drift,baseline"
    assert _names(_collected(pytester, "--rollout-chaos", named)) == ["baseline", "retokenization-drift"]
    assert _names(_collected(pytester, "--rollout-chaos", "ours.chaos.yaml", named)) == [
        "baseline",
        "our-own",
        "retokenization-drift",
    ]
    ini = ("-o", "rollout_chaos_scenario=baseline")
    assert _names(_collected(pytester, "--rollout-chaos", *ini)) == ["baseline"]
    header = pytester.runpytest("--collect-only", "--rollout-chaos", named)
    header.stdout.fnmatch_lines(
        ["rollout-chaos: no paths given: collecting the built-in scenarios retokenization-drift, baseline *"]
    )


def test_an_unknown_builtin_scenario_is_a_usage_error_listing_the_names(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--rollout-chaos", "--rollout-chaos-scenario=baseline,basline")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --rollout-chaos-scenario: unknown built-in scenario 'basline' "
            f"(valid: {', '.join(BUILTIN)}; `rollout-chaos list` describes them; *"
        ]
    )


def _names(items: list[str]) -> list[str]:
    return sorted(item.rsplit("::", 1)[1] for item in items)
