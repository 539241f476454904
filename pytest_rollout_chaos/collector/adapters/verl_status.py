"""The ``verl`` adapter's row status, from verl's own per-row signals and nothing else.

verl's ``DataProto`` carries no finish reason and the recipe marks no row failed; verl trains
every row as it stands. Two per-row signals exist on the data path, and the status is read from
them:

- **aborted**: a row with no response token. verl's step metrics count exactly those rows as
  aborted (``compute_data_metrics``: ``response_length == 0`` of ``_compute_response_info``,
  ``verl/trainer/ppo/metric_utils.py``), and that function is what reads it here. The recipe
  cannot hand verl such a row today: it pads each response with the tokenizer, an empty one comes
  back a list, and the packing raises for the whole batch first.
- **truncated**: the recipe's ``hit_max``, which ``_compute_rollout_metrics`` computes per row (all
  of a row's tokens, before the batch cuts them, ``>= rollout.max_model_len``) and folds into the
  batch's ``truncation_rate``. The adapter watches the recipe's own call (the function is wrapped
  for the collection, called as the recipe calls it, its answer unchanged) and asks the same
  function about each row alone. Under verl's default ``max_model_len: null`` the recipe neither
  truncates nor knows of truncation, so no row is truncated there: a row whose last generation the
  policy cut at its token limit is trained, and read back, as completed.

Everything else is completed.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_rollout_chaos.collector.protocol import RolloutStatus

METRICS_MODULE: Final = "verl.trainer.ppo.metric_utils"
ROLLOUT_METRICS: Final = "_compute_rollout_metrics"
STOOD_IN: Final = (
    "the row status, from verl's own per-row signals only: aborted where the row has no response "
    "token (what compute_data_metrics counts as aborted), truncated where the recipe's hit_max holds "
    "(all its tokens >= rollout.max_model_len; never under verl's default max_model_len: null, so a "
    "row cut at the generation limit reads completed there), else completed",
)
"""What the row status is read from (``verl_train_batch.STOOD_IN`` lists it with the call)."""
ABORTED: Final = (
    "verl counts this row aborted: it has no response token (verl/trainer/ppo/metric_utils.py, "
    "compute_data_metrics: response_length == 0)"
)


@dataclass
class RolloutMetrics:
    """The recipe's ``_compute_rollout_metrics`` calls of one collection: its results, its limit."""

    original: Any
    calls: list[tuple[list[dict[str, Any]], Any]] = field(default_factory=list)

    def __call__(self, results: list[dict[str, Any]], max_model_len: Any = None) -> Any:
        self.calls.append((results, max_model_len))
        return self.original(results, max_model_len)

    def hit_max(self) -> list[bool]:
        """Per row of the last call, the recipe's ``hit_max``: its function on that row alone."""
        if not self.calls:
            return []
        results, max_model_len = self.calls[-1]
        return [self.original([result], max_model_len)["truncation_rate"] == 1.0 for result in results]


@contextmanager
def watching(recipe: Any) -> Iterator[RolloutMetrics]:
    """The recipe's ``_compute_rollout_metrics`` watched while the block runs, then restored."""
    original = getattr(recipe, ROLLOUT_METRICS)
    watched = RolloutMetrics(original)
    setattr(recipe, ROLLOUT_METRICS, watched)
    try:
        yield watched
    finally:
        setattr(recipe, ROLLOUT_METRICS, original)


def statuses(batch: Any, hit_max: list[bool]) -> list[tuple[RolloutStatus, str | None]]:
    """Each row's status and error, from verl's signals (module docstring); ``hit_max`` per row of
    the manager's output, in the batch's order."""
    metrics: Any = importlib.import_module(METRICS_MODULE)
    lengths = metrics._compute_response_info(batch)["response_length"].tolist()
    made: list[tuple[RolloutStatus, str | None]] = []
    for position, length in enumerate(lengths):
        if length == 0:
            made.append(("aborted", ABORTED))
        elif position < len(hit_max) and hit_max[position]:
            made.append(("truncated", None))
        else:
            made.append(("completed", None))
    return made
