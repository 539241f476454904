"""What the terminal shows besides the results: a line per server as the stack starts (not under
``-qq``), the ``rollout-chaos`` section in one line per scenario under ``-q``, and its marks in
pytest's colours where ``--color`` gives them."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.servers.keeper import STARTING_LINE
from tests._stand_in_servers import STARTS_SERVERS
from tests.plugin._report_project import make_project

GREEN = "\x1b[32m"


@pytest.mark.parametrize("verbosity", [[], ["-q"], ["-v"]])
def test_each_server_says_it_is_ready_while_the_stack_starts(
    pytester: pytest.Pytester, verbosity: list[str]
) -> None:
    pytester.makepyfile(test_servers=STARTS_SERVERS)
    result = pytester.runpytest_subprocess("--rollout-chaos", *verbosity)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [STARTING_LINE, "rollout-chaos: policy ready in *s", "rollout-chaos: gym_model ready in *s"]
    )
    assert result.stdout.str().count(STARTING_LINE) == 1


def test_very_quiet_runs_say_nothing_while_the_stack_starts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_servers=STARTS_SERVERS)
    result = pytester.runpytest_subprocess("--rollout-chaos", "-qq")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.no_fnmatch_line("rollout-chaos: *")


def test_quiet_runs_get_one_line_per_scenario(pytester: pytest.Pytester) -> None:
    make_project(pytester, "all-complete", "loses-a-row")
    result = pytester.runpytest("--rollout-chaos", "-q")
    result.assert_outcomes(passed=1, failed=1)
    section = result.stdout.str().split("= rollout-chaos =", 1)[1].splitlines()[1:]
    assert section[:3] == [
        "scenarios: 2 run, 1 passed, 1 failed",
        "  PASS   all-complete     0.25s  1 fault",
        "  FAIL   loses-a-row      0.25s  1 fault  accounted FAIL",
    ]
    result.stdout.no_fnmatch_line("invariants: *")
    result.stdout.no_fnmatch_line("per scenario:")


@pytest.mark.parametrize(("color", "painted"), [("yes", True), ("no", False)])
def test_the_marks_take_pytests_colours_where_the_terminal_has_them(
    pytester: pytest.Pytester, color: str, painted: bool
) -> None:
    make_project(pytester, "all-complete")
    result = pytester.runpytest("--rollout-chaos", f"--color={color}")
    result.assert_outcomes(passed=1)
    line = next(line for line in result.outlines if "all-complete" in line and "0.25s" in line)
    mark = line.split("all-complete")[0]
    assert (GREEN in mark and mark.rstrip().endswith("\x1b[0m")) is painted
    assert ("\x1b[" in line) is painted
