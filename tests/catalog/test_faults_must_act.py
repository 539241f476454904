"""A scenario whose fault never fired, or fired and touched nothing, tested nothing: it fails as
a scenario error, even though every invariant passed, instead of passing vacuously."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

LATE_FAULT = """\
name: late-fault
description: the kill comes long after the collection has ended
upstream: ["example/repo#1"]
workload:
  rows_per_task: 2
faults:
  - kind: kill
    target: agent
    at: {after_s: 25}
expect:
  invariants: [accounted, bounded]
  within_s: 20
"""


def test_a_fault_that_never_fired_fails_the_scenario(pytester: pytest.Pytester) -> None:
    pytester.makefile(".chaos.yaml", late=LATE_FAULT)
    result = pytester.runpytest_subprocess("--rollout-chaos", "-p", "no:cacheprovider", timeout=180)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*before these fault steps were triggered, so the scenario tested nothing there:*",
            "*line 7: kill() on agent at t=25s*",
            "*hint: fix the scenario file*",
        ]
    )


MISSED_FAULT = """\
name: missed-fault
description: a NaN fault aimed at a route the collection never calls
upstream: ["example/repo#1"]
workload:
  rows_per_task: 2
faults:
  - kind: nan_logprobs
    target: policy
    route: /v1/embeddings
expect:
  invariants: [accounted, bounded]
  within_s: 20
"""

MEANT_TO_MISS = MISSED_FAULT.replace("name: missed-fault", "name: meant-to-miss").replace(
    "    route: /v1/embeddings\n", "    route: /v1/embeddings\n    expect_hits: 0\n"
)

COUNTED_STORM = """\
name: counted-storm
description: three 503s from the policy, and the step says it must touch exactly two
upstream: ["example/repo#1"]
workload:
  rows_per_task: 4
faults:
  - kind: http_error
    target: policy
    status: 503
    count: 3
    expect_hits: 2
expect:
  invariants: [bounded]
  within_s: 20
"""


def test_a_fault_that_touched_nothing_fails_unless_it_says_so(pytester: pytest.Pytester) -> None:
    pytester.makefile(".chaos.yaml", missed=MISSED_FAULT, meant=MEANT_TO_MISS, counted=COUNTED_STORM)
    result = pytester.runpytest_subprocess("--rollout-chaos", "-p", "no:cacheprovider", "-v", timeout=240)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*meant.chaos.yaml::meant-to-miss PASSED*"], consecutive=False)
    result.stdout.fnmatch_lines(
        [
            "*these faults did not act on the collection, so the scenario tested nothing there:*",
            "*line 7: nan_logprobs(route='/v1/embeddings') on policy at start was injected at t=*s and "
            "touched 0 requests hit by its rule (expect_hits: at least 1); it matched {'route': "
            "'/v1/embeddings'}; the collection ran from t=*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*line 7: http_error(status=503, count=3) on policy at start was injected*"
            "touched 3 requests hit by its rule (expect_hits: 2)*"
        ]
    )


UNUSED_SERVER_KILLED = """\
name: unused-server-killed
description: native style collects without agents, so a kill of an agent hits nothing it uses
upstream: ["example/repo#1"]
workload:
  rows_per_task: 2
  tasks: [calculator]
  style: native
faults:
  - kind: kill
    target: calculator_agent
expect:
  invariants: [accounted, bounded]
  within_s: 30
"""

UNUSED_SERVER_MEANT = UNUSED_SERVER_KILLED.replace(
    "name: unused-server-killed", "name: unused-server-meant"
).replace("    target: calculator_agent\n", "    target: calculator_agent\n    expect_hits: 0\n")


def test_a_process_fault_on_a_server_the_collection_never_uses_fails(pytester: pytest.Pytester) -> None:
    # The process existed and was killed, but no request of the collection went to it: that a
    # process was there is not enough, the fault must hit something the collection used.
    pytester.makefile(".chaos.yaml", unused=UNUSED_SERVER_KILLED, meant=UNUSED_SERVER_MEANT)
    result = pytester.runpytest_subprocess("--rollout-chaos", "-p", "no:cacheprovider", "-v", timeout=240)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*meant.chaos.yaml::unused-server-meant PASSED*"], consecutive=False)
    result.stdout.fnmatch_lines(
        [
            "*these faults did not act on the collection, so the scenario tested nothing there:*",
            "*line 9: kill() on calculator_agent at start was injected at t=*s and touched 0 requests "
            "into its server, in flight or sent while it was down (expect_hits: at least 1); the "
            "collection ran from t=*",
        ]
    )
