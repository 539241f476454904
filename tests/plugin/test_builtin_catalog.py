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
