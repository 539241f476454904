"""The commented starting file that ``rollout-chaos new NAME`` writes."""

from __future__ import annotations

from string import Template
from typing import Final

TEMPLATE: Final = Template(
    """\
# A rollout-chaos scenario: one fault schedule against the collector under test.
# Check it without running:  rollout-chaos validate $name.chaos.yaml
# Run it:                    pytest --rollout-chaos $name.chaos.yaml
# Every key is documented in the scenarios README and in `rollout-chaos schema`.

name: $name
description: >
  Say which real failure this models and what the collector must do about it.
tags: [network]              # pytest markers: select with -m network
upstream: []                 # references it reproduces, e.g. ["NVIDIA-NeMo/RL#2305"]

stack:
  servers: [policy, model, resources, agent, head]
  agents: 1
  env_latency_ms_per_call: 0
  env_latency_ms_per_item: 0
  rescore_bonus: 0           # each time a row is scored again, its reward this much higher
  reward_spread: 0           # each row's reward this much times (_rowidx mod 4) higher
  policy:
    splice_prefix: true      # splice earlier turns' token ids into the next prompt
    ready_delay_s: 0         # the policy answers /health only after this long
    # replicas: 2            # policy servers behind the model server (default: the run's)
    # seed: 7                # the tiny policy's sampling seeds for this scenario (default: the session's)
    # stop: ["</tool_call>"] # stop strings every generation ends at, kept in its text

workload:
  rows_per_task: 4
  generations_per_prompt: 1
  mode: train                # train | validation
  style: gym                 # gym (rows go to agent servers) | native
  tasks: [calculator]
  # max_output_tokens: 16    # the token limit of each generation (omit: the stack's)
  # max_concurrency: 4       # rows the collector may have in flight at once (omit: its own)
  # collections: 2          # steps in a row on one collector; the faults act in the first

faults:                      # kinds and their parameters: rollout-chaos schema
  - kind: latency
    target: agent->model     # network faults act on links, others on servers
    at: {after_completed: 1} # start | {after_completed: N} | {after_s: T} | {on_request: {server: S, nth: N}}
    duration_s: 5            # heal after this long (omit: heal at the end)
    # expect_hits: 0         # requests it must touch (omit: at least one; a fault that touched nothing fails)
    latency_ms: 200

expect:
  rollouts:                  # or `raises: {type: SomeError, match: "regex"}`
    all_completed: true
  invariants: [no_silent_short_count, bounded, ends_promptly, quiet_after_end]
                             # what this scenario is about (all of them: the scenarios README); the
                             # standing ones (accounted, corroborated, ...) judge every scenario anyway.
                             # A listed one that finds nothing to judge fails the scenario as vacuous
  # not_judged: {isolated_failures: why it may find nothing to judge here}
  # witness: {multi_turn_rows: 1}  # required with no fault step: what must happen for it to test anything
  within_s: 60               # past this the scenario fails as `bounded`
"""
)


def render(name: str) -> str:
    """The starting file for scenario ``name``."""
    return TEMPLATE.substitute(name=name)
