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
            "ERROR: --rollout-chaos-scenario: unknown built-in scenario 'basline'; did you mean 'baseline'? "
            f"(valid: {', '.join(BUILTIN)}; `rollout-chaos list` describes them; *"
        ]
    )


def _names(items: list[str]) -> list[str]:
    return sorted(item.rsplit("::", 1)[1] for item in items)


# A runner that starts nothing and fails one built-in scenario.
FAILS_ONE = """
import pytest

@pytest.fixture
def chaos_scenario_runner():
    def run(scenario, request):
        assert scenario.name != "retokenization-drift", "fails on purpose"
    return run
"""


@pytest.mark.parametrize("start", [".", "sub"], ids=["at-the-rootdir", "in-a-subfolder"])
def test_a_failing_builtin_scenario_reruns_by_the_id_printed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    """The catalog lies outside the rootdir (in the installed package, or here this checkout): the
    id in the FAILED line, pasted back as it is, runs that scenario again and is printed the same."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(FAILS_ONE)
    pytester.mkdir("sub")
    monkeypatch.chdir(pytester.path / start)
    first = pytester.runpytest("--rollout-chaos", "-rf")
    first.assert_outcomes(failed=1, passed=len(BUILTIN) - 1)
    [printed] = [line.split()[1] for line in first.outlines if line.startswith("FAILED ")]
    assert printed.endswith("retokenization-drift.chaos.yaml::retokenization-drift")
    again = pytester.runpytest("--rollout-chaos", "-rf", printed)
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines([f"FAILED {printed} - *"])
    by_name = pytester.runpytest("--rollout-chaos", "-rf", "--rollout-chaos-scenario=retokenization-drift")
    by_name.stdout.fnmatch_lines([f"FAILED {printed} - *"])
