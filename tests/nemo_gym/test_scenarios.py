"""Scenarios through the runner on the nemo-gym backend, end to end in a pytest subprocess.

One clean scenario, two fault scenarios where real NeMo Gym would retry forever (the reference
collector's deadline must turn that into a named failure), and a native-style one that steps the
backend's environment (with latency) in batches. Afterwards no NeMo Gym server is left.
"""

from __future__ import annotations

import pytest

from pytest_rollout_chaos.servers.nemo_gym.locate import GymPython
from pytest_rollout_chaos.servers.nemo_gym.stack import LAUNCHER
from tests.nemo_gym._processes import started_here

pytestmark = pytest.mark.slow  # runs scenarios on the whole NeMo Gym stack

CLEAN = """
name: clean
description: No fault; every row completes on real NeMo Gym servers.
workload: {rows_per_task: 2, tasks: [calculator, echo]}
expect:
  rollouts: {all_completed: true}
  invariants: [accounted, no_silent_short_count, finite_logprobs, prefix_consistent, bounded]
  witness: {rows_answered: 4}
  within_s: 20
"""

RESOURCES_DOWN = """
name: resources-down-fast
description: NeMo Gym retries a refused resources server forever; the collector must fail in time.
workload: {rows_per_task: 2, tasks: [calculator]}
faults:
  - {kind: down, target: agent->resources}
expect:
  raises: {type: Exception}
  invariants: [accounted, no_silent_short_count, root_cause_visible, bounded]
  within_s: 8
"""

AGENT_FROZEN = """
name: agent-frozen-fast
description: The real simple_agent process is frozen (SIGSTOP); the collector must not hang.
workload: {rows_per_task: 2, tasks: [calculator]}
faults:
  - {kind: freeze, target: agent}
expect:
  invariants: [accounted, bounded, root_cause_visible]
  within_s: 8
"""

NATIVE = """
name: native-batched
description: Native style on the nemo-gym backend; one batched env.step per task group and turn.
stack: {env_latency_ms_per_call: 20, env_latency_ms_per_item: 1}
workload: {rows_per_task: 3, tasks: [calculator, echo], mode: validation, style: native}
expect:
  rollouts: {min_completed: 3}
  invariants: [accounted, batched_env_eval, finite_logprobs, bounded]
  witness: {task_groups_stepped: 2}
  within_s: 30
"""


RAY_PROCESSES = ("raylet", "gcs_server", "ray::")


def _launched() -> set[int]:
    """Pids of running NeMo Gym servers started through our launcher, and of any Ray daemon, that
    this worker started."""
    return started_here(
        lambda process: (
            str(LAUNCHER) in (process.info["cmdline"] or [])
            or str(process.info["name"]).startswith(RAY_PROCESSES)
        )
    )


def test_scenarios_on_the_nemo_gym_backend(pytester: pytest.Pytester, gym_python: GymPython) -> None:
    before = _launched()
    for name, text in {
        "clean": CLEAN,
        "resources_down": RESOURCES_DOWN,
        "agent_frozen": AGENT_FROZEN,
        "native": NATIVE,
    }.items():
        pytester.makefile(".chaos.yaml", **{name: text})
    result = pytester.runpytest_subprocess(
        "--rollout-chaos",
        "--rollout-chaos-gym=nemo-gym",
        f"--rollout-chaos-gym-python={gym_python.path}",
        "-p",
        "no:cacheprovider",
        "-rs",
        timeout=150,
    )
    result.stdout.fnmatch_lines([f"*nemo-gym backend: nemo_gym {gym_python.nemo_gym_version} on Python*"])
    result.assert_outcomes(passed=4)
    assert _launched() - before == set(), "NeMo Gym servers or Ray daemons outlived the pytest run"
