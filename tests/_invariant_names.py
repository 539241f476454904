"""The invariant names users write in ``expect.invariants`` and read in reports: an interface,
in the order the registry runs them. A name changes only through an issue; a new one is added
here, beside its registration."""

from __future__ import annotations

INTERFACE_NAMES = (
    "accounted",
    "no_silent_short_count",
    "isolated_failures",
    "finite_logprobs",
    "prefix_consistent",
    "prompts_sent",
    "batched_env_eval",
    "bounded",
    "root_cause_visible",
    "corroborated",
    "turns_generated",
    "logprobs_generated",
    "rewards_recorded",
    "attempts_bounded",
    "no_empty_epoch",
    "ends_promptly",
    "quiet_after_end",
    "cancel_honoured",
    "raise_has_cause",
    "status_recorded",
    "train_batch_sound",
    "outage_fails_collection",
    "groups_intact",
    "rows_unchanged",
    "concurrency_bounded",
    "drifted_logprobs_masked",
    "retry_faithful",
    "conversation_carried",
    "next_steps_sound",
    "row_deadline_kept",
)
