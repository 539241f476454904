"""A collector that declares ``styles`` skips the scenarios of another style, saying why, before
any server starts; an invalid declaration is reported as what it is."""

from __future__ import annotations

import pytest

NATIVE = """\
name: native-only
description: A native-style workload with a batched environment.
workload:
  rows_per_task: 2
  mode: validation
  style: native
expect:
  invariants: [accounted, batched_env_eval]
  witness: {task_groups_stepped: 1}
"""

COLLECTORS = """
class GymOnly:
    styles = ("gym",)

    def __init__(self, ctx):
        self.ctx = ctx

    async def collect(self, rows, *, mode):
        raise AssertionError("a native scenario must not reach a gym-only collector")


class Misdeclared(GymOnly):
    styles = "gym"
"""


def test_a_scenario_of_an_undeclared_style_skips_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makefile(".chaos.yaml", native=NATIVE)
    pytester.makepyfile(my_collectors=COLLECTORS)
    pytester.syspathinsert()
    result = pytester.runpytest(
        "--rollout-chaos", "--rollout-chaos-target=my_collectors:GymOnly", "-rs", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED *native-style scenario; the collector under test supports only gym style "
            "(its styles = ('gym',))"
        ]
    )
    result.stdout.no_fnmatch_line("*UNKNOWN*")
    assert not list(pytester.path.rglob("*.log")), "no server may start for a skipped scenario"


def test_an_invalid_styles_declaration_names_the_valid_form(pytester: pytest.Pytester) -> None:
    pytester.makefile(".chaos.yaml", native=NATIVE)
    pytester.makepyfile(my_collectors=COLLECTORS)
    pytester.syspathinsert()
    result = pytester.runpytest(
        "--rollout-chaos", "--rollout-chaos-target=my_collectors:Misdeclared", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Misdeclared.styles is 'gym'; valid: a tuple of 'gym', 'native'*"])
