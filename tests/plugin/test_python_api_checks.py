"""The Python API checks like YAML does, and an opt-in plugin that is off says what it skipped.

A test that injects faults through ``chaos_faults`` or ``chaos_fault`` markers and passes while a
fault touched nothing of its collection fails with the scenario's message; ``expect_hits=0``
says a fault is meant to hit nothing. Without ``--rollout-chaos`` such tests skip, so a
trainer's ordinary ``pytest`` keeps working, and the run ends with one line counting them.
"""

from __future__ import annotations

import pytest

PYTHON_CHAOS_TESTS = """
import pytest


@pytest.mark.asyncio
@pytest.mark.chaos_fault("nan_logprobs", "policy", route="/v1/embeddings")
async def test_marker_missed(chaos_collector, chaos_gym):
    rollouts = await chaos_collector.collect(chaos_gym.rows("calculator", 2), mode="train")
    assert len(rollouts) == 2


@pytest.mark.asyncio
async def test_kill_missed(chaos_collector, chaos_gym, chaos_faults):
    await chaos_faults.inject("kill", "echo_agent")  # the rows are calculator rows only
    rollouts = await chaos_collector.collect(chaos_gym.rows("calculator", 2), mode="train")
    assert len(rollouts) == 2


@pytest.mark.asyncio
async def test_kill_meant_to_miss(chaos_collector, chaos_gym, chaos_faults):
    await chaos_faults.inject("kill", "echo_agent", expect_hits=0)
    rollouts = await chaos_collector.collect(chaos_gym.rows("calculator", 2), mode="train")
    assert len(rollouts) == 2


@pytest.mark.asyncio
@pytest.mark.chaos_fault("latency", "agent->model", latency_ms=20)
async def test_acted(chaos_collector, chaos_gym):
    rollouts = await chaos_collector.collect(chaos_gym.rows("calculator", 2), mode="train")
    assert len(rollouts) == 2


@pytest.mark.asyncio
async def test_own_failure_stands(chaos_faults):
    await chaos_faults.inject("kill", "echo_agent")
    raise AssertionError("the test's own failure")
"""


@pytest.mark.slow
def test_a_python_chaos_test_whose_fault_touched_nothing_fails_like_a_scenario(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_api=PYTHON_CHAOS_TESTS)
    result = pytester.runpytest_subprocess("--rollout-chaos", "-p", "no:cacheprovider", "-v", timeout=240)
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines(
        ["*test_api.py::test_kill_meant_to_miss PASSED*", "*test_api.py::test_acted PASSED*"],
        consecutive=False,
    )
    result.stdout.fnmatch_lines(
        [
            "*_ test_marker_missed _*",
            "*these faults did not act on the collection, so the test tested nothing there:",
            "*inject nan_logprobs(route='/v1/embeddings') on policy was injected at t=*s and touched 0 "
            "requests hit by its rule (expect_hits: at least 1); it matched {'route': '/v1/embeddings'}; "
            "the test ran until t=*s",
            "*aim them at what the workload uses (route, row, target), inject them while the collection "
            "runs, or say what they must touch with expect_hits= (0 for a fault meant to hit nothing)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ test_kill_missed _*",
            "*these faults did not act on the collection, so the test tested nothing there:",
            "*inject kill() on echo_agent was injected at t=*s and touched 0 requests into its server, in "
            "flight or sent while it was down (expect_hits: at least 1); the test ran until t=*s",
        ]
    )
    # A test that failed on its own is reported as it failed, not as a fault that did not act.
    result.stdout.fnmatch_lines(["FAILED test_api.py::test_own_failure_stands - AssertionError*"])


CHAOS_TESTS_AND_A_PLAIN_ONE = """
import pytest


@pytest.mark.asyncio
async def test_collects(chaos_collector):
    raise AssertionError("must have been skipped")


@pytest.mark.asyncio
@pytest.mark.chaos_fault("kill", "agent")
async def test_marked(chaos_faults):
    raise AssertionError("must have been skipped")


def test_stack(chaos_stack):
    raise AssertionError("must have been skipped")


def test_plain():
    pass
"""

NOT_RUN = " ".join(
    (
        "rollout-chaos: 3 chaos tests skipped:",
        "--rollout-chaos is off (add --rollout-chaos or rollout_chaos = true)",
    )
)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_with_the_plugin_off_the_run_ends_counting_the_chaos_tests_it_skipped(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_mixed=CHAOS_TESTS_AND_A_PLAIN_ONE)
    result = pytester.runpytest("-p", "no:cacheprovider", *workers)
    result.assert_outcomes(passed=1, skipped=3)
    assert result.ret == pytest.ExitCode.OK  # an opt-in plugin does not break a trainer's pytest
    result.stdout.fnmatch_lines([NOT_RUN, "*= 1 passed, 3 skipped in *"])


def test_with_the_plugin_off_and_no_chaos_test_nothing_is_said(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("rollout-chaos: *")
