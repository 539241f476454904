"""``--rollout-chaos-policy-replicas``: its ini twin, its usage errors, and the replica count
``policy[i]`` targets are checked against at collection."""

from __future__ import annotations

import pytest

from pytest_rollout_chaos import options
from pytest_rollout_chaos import settings as s
from tests.conftest import INNER_ASYNCIO_INI

SHOW_SETTINGS = """
    def test_show(chaos_settings):
        print("SETTINGS", chaos_settings)
"""

KILL_REPLICA_1 = """
name: kill-replica-one
description: kills the second policy replica
faults:
  - kind: kill
    target: policy[1]
expect:
  invariants: [accounted]
"""


def test_one_replica_by_default_the_option_and_its_ini_twin(pytester: pytest.Pytester) -> None:
    assert options.resolve(pytester.parseconfigure()).policy_replicas == 1
    assert options.resolve(pytester.parseconfigure("--rollout-chaos-policy-replicas=3")).policy_replicas == 3
    pytester.makeini(f"[pytest]\n{s.OPT_POLICY_REPLICAS} = 2\n" + INNER_ASYNCIO_INI)
    assert options.resolve(pytester.parseconfigure()).policy_replicas == 2
    # the command line wins over the ini file
    assert options.resolve(pytester.parseconfigure("--rollout-chaos-policy-replicas=4")).policy_replicas == 4


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            ["--rollout-chaos-policy-replicas=0"],
            "*--rollout-chaos-policy-replicas: invalid value '0' (valid: a whole number >= 1)*",
        ),
        (
            ["--rollout-chaos-policy-replicas=two"],
            "*--rollout-chaos-policy-replicas: invalid value 'two' (valid: a whole number >= 1)*",
        ),
        (
            ["--rollout-chaos-policy-replicas=2", "--rollout-chaos-policy-url=http://127.0.0.1:9/v1"],
            "*--rollout-chaos-policy-replicas: 2 replicas cannot be started beside "
            "--rollout-chaos-policy-url=http://127.0.0.1:9, which names one server*(valid: 1, *",
        ),
    ],
)
def test_bad_counts_are_usage_errors_naming_the_option(
    pytester: pytest.Pytester, arguments: list[str], expected: str
) -> None:
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest(*arguments)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {expected}"])


def test_a_bad_ini_count_names_the_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makeini(f"[pytest]\n{s.OPT_POLICY_REPLICAS} = -1\n" + INNER_ASYNCIO_INI)
    pytester.makepyfile(SHOW_SETTINGS)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*ini option 'rollout_chaos_policy_replicas' (twin of --rollout-chaos-policy-replicas): "
            "invalid value '-1'*"
        ]
    )


def test_a_replica_target_is_checked_against_the_replicas_the_run_starts(pytester: pytest.Pytester) -> None:
    pytester.makefile(".chaos.yaml", kill=KILL_REPLICA_1)
    refused = pytester.runpytest("--rollout-chaos", "--collect-only", "kill.chaos.yaml")
    refused.assert_outcomes(errors=1)
    expected = (
        "*kill.chaos.yaml:5: faults[0].target: 'policy[1]' is not a replica the stack runs: it runs 1 "
        "policy replica(s)*(valid: policy, policy[0])"
    )
    refused.stdout.fnmatch_lines([expected.replace("[", "[[]")])  # literal brackets for fnmatch
    accepted = pytester.runpytest(
        "--rollout-chaos", "--rollout-chaos-policy-replicas=2", "--collect-only", "kill.chaos.yaml"
    )
    assert accepted.ret == pytest.ExitCode.OK
    accepted.stdout.fnmatch_lines(["*kill-replica-one*"])
