"""The scenario format as field tables: every key, its type, default and meaning.

``model`` validates files with these tables and ``schema`` prints them as JSON Schema; a key
added here is at once accepted, documented in the schema and type-checked.
"""

from __future__ import annotations

from typing import Final

from pytest_rollout_chaos.scenario import mappings as m
from pytest_rollout_chaos.scenario import spec as s
from pytest_rollout_chaos.scenario import vocabulary as v
from pytest_rollout_chaos.scenario.steps import FaultStepSpec

POLICY: Final = m.Section(
    (
        m.Field(
            "splice_prefix",
            s.Boolean(),
            "splice earlier turns' token ids into the next prompt (required_prefix_token_ids)",
            default=True,
        ),
        m.Field(
            "ready_delay_s",
            s.Number(),
            "the policy server answers /health only after this many seconds (readiness must wait)",
            default=0.0,
        ),
        m.Field(
            "replicas",
            s.Integer(1),
            "policy servers this scenario needs behind the model server, whatever "
            "--rollout-chaos-policy-replicas says (skipped where the stack cannot have them); "
            "default: the run's",
        ),
        m.Field(
            "seed",
            s.Integer(0),
            "the tiny policy samples this scenario's unseeded requests from this seed, wherever it "
            "runs in a session (vLLM and an external policy sample from their own generators); "
            "default: the session's sequence",
        ),
        m.Field(
            "stop",
            s.ListOf(s.Text(what="a non-empty stop string"), unique=True),
            "stop strings the Gym model server adds to every generation request, kept in the text "
            "(include_stop_str_in_output), as a multi-turn agent ends a turn at its tool call "
            "(</tool_call>): such a turn ends without EOS (vllm_model's extra_body; the embedded "
            "model server only, gym style)",
            default=(),
        ),
    ),
    doc="policy server options",
)

STACK: Final = m.Section(
    (
        m.Field(
            "servers",
            s.ListOf(s.Choice(v.SERVERS, "server"), min_items=1, unique=True),
            "the servers to start",
            default=v.SERVERS,
        ),
        m.Field("agents", s.Integer(1), "agent server processes to run", default=1),
        m.Field(
            "env_latency_ms_per_call", s.Number(), "environment latency added to every env call", default=0.0
        ),
        m.Field(
            "env_latency_ms_per_item",
            s.Number(),
            "environment latency added per item of a batch",
            default=0.0,
        ),
        m.Field(
            "rescore_bonus",
            s.Number(),
            "added to a row's reward each time the resources server scores that row again (/verify, "
            "/step_batch), as a stochastic judge would, so a row's attempts earn different rewards "
            "(our resources server only: skipped in gym style on real NeMo Gym)",
            default=0.0,
        ),
        m.Field(
            "reward_spread",
            s.Number(),
            "each row's reward raised by this much times its _rowidx mod 4, so the members of a "
            "GRPO group earn different rewards and a group left out of training had something to "
            "teach (our resources server only: skipped in gym style on real NeMo Gym)",
            default=0.0,
        ),
        m.Field("policy", POLICY, "policy server options"),
    ),
    doc="which servers run and how",
)

WORKLOAD: Final = m.Section(
    (
        m.Field("rows_per_task", s.Integer(1), "rows requested per task", default=4),
        m.Field("generations_per_prompt", s.Integer(1), "rollouts per row (GRPO group size)", default=1),
        m.Field("mode", s.Choice(v.MODES, "mode"), "the collector's mode", default="train"),
        m.Field(
            "style",
            s.Choice(v.STYLES, "style"),
            "gym: rows go to agent servers; native: the collector drives the policy and env itself",
            default="gym",
        ),
        m.Field(
            "tasks",
            s.ListOf(s.Choice(v.TASK_NAMES, "task"), min_items=1, unique=True),
            "task groups in the batch",
            default=(v.TASK_NAMES[0],),
        ),
        m.Field(
            "row_ids",
            s.Choice(v.ROW_IDS, "row_ids"),
            "how the rows' _rowidx are numbered: positions (0..N-1), offset (from 1000) or sparse (7, "
            "10, 13, ...: gaps); a trainer's ids are rarely the rows' positions in the request",
            default="positions",
        ),
        m.Field(
            "order",
            s.Choice(v.ROW_ORDERS, "order"),
            "the order of the prompts' groups in the request: by_task (each task's rows together), "
            "interleaved (one group of each task in turn) or shuffled (a fixed shuffle); a group's "
            "generations stay together, and _rowidx keep the by-task numbering, so ids run out of order",
            default="by_task",
        ),
        m.Field(
            "max_concurrency",
            s.Integer(1),
            "rows the collector may have in flight at once (its CollectorSettings.max_concurrency), "
            "so rows beyond it queue behind the others; default: the collector's own (16)",
        ),
        m.Field(
            "collections",
            s.Integer(1, 4),
            "collections in a row on one collector object, as a trainer's steps: after the first ends "
            "and every fault is healed, collect is called again with a fresh copy of the same rows, "
            "each within expect.within_s; the invariants judge the first, next_steps_sound the others",
            default=1,
        ),
        m.Field(
            "max_output_tokens",
            s.Integer(1),
            "the token limit of each generation: every row's responses_create_params.max_output_tokens "
            "(native style: the collector's max_new_tokens); default: the stack's",
        ),
        m.Field(
            "trainer_config",
            m.DottedSettings(v.TRAINERS),
            "upstream settings an adapter gives the trainer instead of the trainer's own defaults, as "
            "TRAINER.dotted.key: value (nemo_rl.policy.generation.vllm_cfg.async_engine: true); "
            "every other setting stays upstream's default, and an adapter of another trainer ignores them",
        ),
    ),
    doc="what the collector is asked to collect",
)

RAISES: Final = m.Section(
    (
        m.Field(
            "type", s.Text(r"[A-Za-z_][A-Za-z0-9_.]*", "an exception class name"), "exception class", True
        ),
        m.Field("match", s.Regex(), "regular expression searched in the message"),
    ),
    doc="the collector must raise this",
)

ROLLOUTS: Final = m.Section(
    (
        m.Field("all_completed", s.Boolean(), "every rollout has status completed"),
        m.Field("aborted_max", s.Integer(0), "at most this many rollouts aborted"),
        m.Field("aborted_rows", s.ListOf(s.Integer(0), unique=True), "exactly these row indexes end aborted"),
        m.Field("min_completed", s.Integer(0), "at least this many rollouts completed"),
    ),
    doc="conditions on the returned rollouts",
)

EXPECT: Final = m.Section(
    (
        m.Field("raises", RAISES, "the collector must raise (excludes rollouts)"),
        m.Field("rollouts", ROLLOUTS, "conditions on the returned rollouts (excludes raises)"),
        m.Field(
            "invariants",
            s.ListOf(s.Choice(v.INVARIANTS, "invariant"), min_items=1, unique=True),
            "invariants that must hold and must find something to judge, by name (besides the standing "
            f"ones every scenario is judged by: {', '.join(v.STANDING_INVARIANTS)})",
            True,
        ),
        m.Field(
            "not_judged",
            m.MappingOf(v.INVARIANTS, s.Text(what="the reason"), "invariant", min_items=1),
            "listed invariants that may find nothing to judge on this scenario, each with the reason "
            "(otherwise one that judged nothing fails the scenario as vacuous)",
        ),
        m.Field(
            "witness",
            m.MappingOf(v.WITNESSES, s.Integer(1), "witness", min_items=1),
            "what must have happened for the scenario to test anything: witness name -> the least "
            "count seen (required when there is no fault step)",
        ),
        m.Field("within_s", s.Number(0.0, exclusive=True), "deadline of the whole scenario", default=60.0),
    ),
    doc="what must be true at the end",
)

SCENARIO: Final = m.Section(
    (
        m.Field("name", s.Text(v.NAME_PATTERN, "lowercase letters, digits, - and _"), "test name", True),
        m.Field("description", s.Text(), "the real failure this scenario models", True),
        m.Field(
            "tags",
            s.ListOf(s.Text(v.TAG_PATTERN, "a marker name: lowercase identifier"), unique=True),
            "pytest markers (select with -m)",
            default=(),
        ),
        m.Field(
            "upstream",
            s.ListOf(s.Text(what="a reference such as owner/repo#123"), unique=True),
            "upstream issues or pull requests this scenario reproduces",
            default=(),
        ),
        m.Field("stack", STACK, "which servers run and how"),
        m.Field("workload", WORKLOAD, "what the collector is asked to collect"),
        m.Field("faults", s.ListOf(FaultStepSpec()), "fault steps, injected and healed in order", default=()),
        m.Field("expect", EXPECT, "what must be true at the end", True),
    ),
    doc="A rollout-chaos scenario (*.chaos.yaml)",
)
