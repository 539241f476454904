"""A scenario file with every kind of mistake at once, and the problems one validation pass reports."""

from __future__ import annotations

from pytest_rollout_chaos import invariants
from pytest_rollout_chaos.faults import registry

ROWS_2 = "rows = tasks x rows_per_task x generations_per_prompt = 1 x 2 x 1"
RETRY = "to aim at a retry, give the fault a row: nth then counts that row's attempts"

# Every kind of mistake at once: field rules and rules between fields, in every section.
MANY = """\
name: Many-Problems
description: every kind of mistake at once
workload:
  rows_per_task: 2
  tasks: [calculator]
  mode: trian
stack:
  servers: [policy, model, agent, head]
faults:
  - kind: trajectory_exception
    target: agent
    row: 7
  - kind: kill
    target: resources
    at: {after_completed: 50}
  - kind: latncy
    target: agent->model
    at: {after_s: -1}
  - kind: http_error
    target: calculator_agent
    route: /run
    nth: 3
    status: 200
  - kind: freeze
    target: echo_agent
    at:
      on_request: {server: agent, nth: 9}
expect:
  raises: {type: RuntimeError}
  rollouts:
    aborted_rows: [1, 5]
    min_completed: 3
  invariants: [accounted, acounted]
"""


def many_problems(shown: str) -> list[str]:
    """The problems of ``MANY``, one line each, as validate prints them for a file shown as ``shown``."""
    return [line.replace("s.chaos.yaml:", f"{shown}:", 1) for line in _PROBLEMS]


_PROBLEMS = [
    "s.chaos.yaml:1: name: invalid value 'Many-Problems' (valid: lowercase letters, digits, - and _)",
    "s.chaos.yaml:6: workload.mode: unknown mode 'trian'; did you mean 'train'? (valid: train, validation)",
    f"s.chaos.yaml:12: faults[0].row: row 7 does not exist: the workload has 2 rows (valid: 0..1; {ROWS_2})",
    "s.chaos.yaml:14: faults[1].target: 'resources' is not in stack.servers "
    "(valid: policy, model, agent, head)",
    "s.chaos.yaml:15: faults[1].at.after_completed: 50 exceeds the workload's 2 rows, so it would never fire "
    f"(valid: 1..2; {ROWS_2})",
    "s.chaos.yaml:16: faults[2].kind: unknown fault kind 'latncy'; did you mean 'latency'? "
    f"(valid: {', '.join(registry.FAULTS)})",
    "s.chaos.yaml:18: faults[2].at.after_s: invalid value -1 (valid: a number >= 0)",
    "s.chaos.yaml:22: faults[3].nth: 3 exceeds the 2 /run requests the workload sends to 'calculator_agent' "
    f"(one per row), so it would fire only on a retry (valid: 1..2; {RETRY})",
    "s.chaos.yaml:23: faults[3].status: invalid value 200 (valid: an integer >= 400 and <= 599)",
    "s.chaos.yaml:25: faults[4].target: no task of the workload uses 'echo_agent'",
    "s.chaos.yaml:27: faults[4].at.on_request.nth: 9 exceeds the 2 /run requests the workload sends to "
    "'agent' (one per row), so it would fire only on a retry (valid: 1..2)",
    "s.chaos.yaml:30: expect.rollouts: give either raises or rollouts, not both "
    "(expect.raises is on line 29): raises says the collector must fail, rollouts that it must return",
    "s.chaos.yaml:31: expect.rollouts.aborted_rows[1]: row 5 does not exist: the workload has 2 rows "
    f"(valid: 0..1; {ROWS_2})",
    "s.chaos.yaml:32: expect.rollouts.min_completed: 3 exceeds the workload's 2 rows "
    f"(valid: 0..2; {ROWS_2})",
    "s.chaos.yaml:33: expect.invariants[1]: unknown invariant 'acounted'; did you mean 'accounted'? "
    f"(valid: {', '.join(invariants.NAMES)})",
]
