"""The ``slime`` adapter past generation: slime's ``RolloutManager.generate`` makes the train data of
the collected groups, and the Rollouts are read back from it.

**``RolloutManager.generate``, what is stood in** (``STOOD_IN``, recorded in
the History with each call, so a failure's story lists them). The manager is built with
``RolloutManager.__new__`` as slime's CPU tests build one, without ``__init__`` (no Ray actor,
SGLang servers, router, data source or tracking), holding the attributes ``generate`` reads. Its
rollout function hands ``generate`` the groups the step loop collected, sorted by their first
sample's index as ``generate_rollout_async`` sorts them, with slime's ``MetricGatherer``'s
metrics. ``_split_train_data_by_dp`` (Ray's object store, the DP schedule) hands the train data
back as it is. The arguments it reads are ``slime_settings``'s. Whatever slime raises on this path
is what ``collect`` raises.

**Reading the train data back** (one Rollout per row, in row order, each ``in_train_batch``):
the tokens, response length, loss mask and rollout logprobs are the train data's, and the loss
mask is handed on as the Rollout's ``loss_mask`` as slime holds it (a row slime trains as several
samples has no one mask: None), with ``loss_reduction`` naming ``--calculate-per-token-loss``
(``loss_reduction``: neither setting leaves an all-zero mask out of the divisor); the reward is
its ``raw_reward`` (its ``rewards`` are the normalized advantages); ``truncated`` makes a
completed row truncated. The status, which the train data does not carry, is the sample's own:
``COMPLETED`` is completed, ``TRUNCATED`` truncated, ``ABORTED`` aborted with
``metadata["abort_reason"]`` (slime's convention), ``FAILED`` (slime: a recoverable failure,
possibly with partial output) aborted with that said, ``PENDING`` (never generated) aborted; an
aborted row in the train data is a sample the trainer trains on all the same, which
``train_batch_sound`` judges. Turns come from what slime would train on: each run of loss-mask 1
in the response is one turn's generation, its logprobs the matching ``rollout_log_probs``, its
prompt every token before it. A row that came back as a one-element ``list[Sample]`` (PR #2078's
isolation placeholder, ``tokens [0, 0]``, loss mask ``[0]``, reward 0) is aborted with an error
that names the shape and gives the cause slime logged for it (the placeholder itself carries
none). ``_get_rollout_data`` flattens by ``data[0]``'s shape alone: when every row crashed the
lists flatten away and the placeholders become train samples; when one did among plain Samples,
the list stays one and ``compute_metrics_from_samples`` raises ``AttributeError`` on its
``effective_response_length`` (or, when it is the batch's first row, the flattening raises
``TypeError`` on the next plain Sample). A row slime hands back but leaves out of the train data
comes back aborted, out of the batch.
"""

from __future__ import annotations

import importlib
import logging
import re
import types
from argparse import Namespace
from dataclasses import replace
from typing import Any, Final

from pytest_rollout_chaos.collector.adapters.slime_imports import MANAGER_MODULE, ROLLOUT_MODULE, TYPES_MODULE
from pytest_rollout_chaos.collector.protocol import LossReduction, Rollout, RolloutStatus, Turn

STOOD_IN: Final = (
    "RolloutManager.__init__ (no Ray actor, no SGLang servers, router, data source or tracking: the "
    "instance gets the attributes generate() reads)",
    "the rollout function (slime's generate_rollout): hands generate() the groups the adapter's "
    "step collected, sorted by their first sample's index as slime sorts them, with slime's "
    "MetricGatherer's metrics",
    "RolloutManager._split_train_data_by_dp (Ray's object store and the DP schedule): the train "
    "data is read where slime packs it for its training ranks",
    "an aborted placeholder row's error: slime's train data carries no cause, so the adapter writes "
    "one naming the shape slime handed back and the line slime logged for the row (root_cause_visible "
    "judges that text)",
)
"""What of slime's ``RolloutManager.generate`` path is stood in; every other line of it is slime's."""
_SEVERITY: Final[tuple[RolloutStatus, ...]] = ("aborted", "truncated", "completed")
"""A row slime trains as several samples reads as its worst one's status."""
_CRASH_INDEX = re.compile(r"\bidx=(\d+)\b")


# -- past generation: slime's RolloutManager to the train data ---------------------------------------
def manager_class() -> Any:
    """slime's ``RolloutManager`` class itself, from under the Ray actor class ``@ray.remote`` made."""
    declared = importlib.import_module(MANAGER_MODULE).RolloutManager
    if isinstance(declared, type) and declared.__module__ == MANAGER_MODULE:
        return declared
    modified = declared.__ray_metadata__.modified_class
    for cls in modified.__mro__:
        if cls.__name__ == "RolloutManager" and cls.__module__ == MANAGER_MODULE:
            return cls
    raise RuntimeError(f"no RolloutManager class under {declared!r}: Ray wraps it in a way not known here")


def train_manager(args: Namespace, finished: list[list[Any]]) -> Any:
    """A ``RolloutManager`` built without its ``__init__`` (``STOOD_IN``: no Ray actor, servers or
    data source), as slime's own CPU tests build one, holding what ``generate`` reads."""
    rollout = importlib.import_module(ROLLOUT_MODULE)
    base_types = importlib.import_module(TYPES_MODULE)
    ordered = sorted(finished, key=lambda group: _first(group).index)
    metrics = rollout.MetricGatherer().collect() if hasattr(rollout, "MetricGatherer") else None

    def generate_rollout(args: Namespace, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
        return base_types.RolloutFnTrainOutput(samples=ordered, metrics=metrics)

    cls = manager_class()
    manager = cls.__new__(cls)  # no __init__: STOOD_IN
    manager.args = args
    manager.pg = None
    manager.data_source = None
    manager.generate_rollout = generate_rollout
    manager.eval_generate_rollout = None
    load = importlib.import_module("slime.utils.misc").load_function
    reward_path, convert_path = (
        args.custom_reward_post_process_path,
        args.custom_convert_samples_to_train_data_path,
    )
    manager.custom_reward_post_process_func = load(reward_path) if reward_path is not None else None
    manager.custom_convert_samples_to_train_data_func = (
        load(convert_path) if convert_path is not None else None
    )
    manager.servers = {}
    manager.rollout_id = -1
    manager._health_monitors = []
    manager._split_train_data_by_dp = lambda data: data
    return manager


def _first(group: list[Any]) -> Any:
    return group[0][0] if isinstance(group[0], list) else group[0]


def loss_reduction(args: Namespace) -> LossReduction:
    """How slime's loss weighs a sample (``slime/backends/megatron_utils/loss.py``, ``cp_utils.py``),
    by ``args.calculate_per_token_loss``. Off (slime's default), each sample's masked mean is summed
    and divided by the step's global batch size, so every sample counts; on, the divisor is the
    step's loss-mask tokens with each sample counted as at least one (``torch.clamp_min(
    loss_mask.sum(), 1)``): an all-zero mask still adds one. Per token in neither sense."""
    if args.calculate_per_token_loss:
        return LossReduction(
            per_token=False,
            setting="--calculate-per-token-loss on (each sample counts at least one token in the "
            "divisor: torch.clamp_min(loss_mask.sum(), 1))",
        )
    return LossReduction(
        per_token=False,
        setting="--calculate-per-token-loss off, slime's default (a mean per sample, divided by the "
        "step's global batch size)",
    )


def read_train_data(
    data: dict[str, Any],
    finished: list[list[Any]],
    crashes: CrashLog,
    *,
    reduction: LossReduction | None = None,
    fan_out: bool = False,
) -> list[Rollout]:
    """One Rollout per row of slime's train data, read from it: the tokens, response length,
    loss mask and rollout logprobs the trainer gets, the raw reward (``rewards`` holds the
    normalized advantages), truncation; the status and abort reason are the sample's own (the
    train data carries none). Each is marked in the train batch with its loss mask as the train
    data holds it (None for a row trained as several samples) and ``reduction``; a row slime
    handed back but left out of the train data comes back aborted, out of it.

    ``fan_out``: the generate hook returns each row as a ``list[Sample]`` (slime's
    ``TrajectoryManager``), so a list is that row's samples, one per chain, each trained: the row's
    turns are theirs in train-data order. Otherwise a list where a Sample was returned is PR
    #2078's placeholder."""
    rows: dict[int, Any] = {}
    for group in finished:
        for element in group:
            members = element if isinstance(element, list) else [element]
            if members:
                rows[members[0].index] = element
    positions: dict[int, list[int]] = {}
    for position, index in enumerate(data["sample_indices"]):
        positions.setdefault(index, []).append(position)
    logprobs = data.get("rollout_log_probs")
    rollouts = []
    for index, element in rows.items():
        members = element if isinstance(element, list) else [element]
        placeholder = isinstance(element, list) and not fan_out
        made = []
        for at, position in enumerate(positions.get(index, [])):
            sample = members[min(at, len(members) - 1)]
            trained = types.SimpleNamespace(
                index=index,
                tokens=data["tokens"][position],
                response_length=data["response_lengths"][position],
                loss_mask=data["loss_masks"][position],
                rollout_log_probs=logprobs[position] if logprobs is not None else None,
                reward=data["raw_reward"][position],
                status=sample.status,
                metadata=sample.metadata,
            )
            one = read_back([trained] if placeholder else trained, crashes)
            if data["truncated"][position] and one.status == "completed":
                one = replace(one, status="truncated")
            made.append(replace(one, loss_mask=trained.loss_mask))
        if made:
            worst = min(made, key=lambda one: _SEVERITY.index(one.status))
            turns = [turn for one in made for turn in one.turns]
            mask = made[0].loss_mask if len(made) == 1 else None
            rollouts.append(
                replace(worst, turns=turns, in_train_batch=True, loss_mask=mask, loss_reduction=reduction)
            )
            continue
        left = read_back(element if placeholder or not isinstance(element, list) else members[0], crashes)
        error = f"slime left row {index} out of the train data" + (f": {left.error}" if left.error else "")
        rollouts.append(replace(left, status="aborted", error=error, in_train_batch=False))
    return rollouts


# -- reading slime's answer back -------------------------------------------------------------------
_STATUS: Final[dict[str, RolloutStatus]] = {
    "completed": "completed",
    "truncated": "truncated",
    "aborted": "aborted",
    "failed": "aborted",
    "pending": "aborted",
}


def read_back(element: Any, crashes: CrashLog) -> Rollout:
    """The Rollout of one element of a group slime returned: a Sample, or a list in its place."""
    if isinstance(element, list):
        return _placeholder(element, crashes)
    status_name = element.status.value
    status = _STATUS[status_name]
    error = None
    if status_name == "aborted":
        error = (element.metadata or {}).get("abort_reason") or (
            f"slime marked row {element.index} ABORTED and recorded no abort_reason"
        )
    elif status_name == "failed":
        reason = (element.metadata or {}).get("abort_reason") or "no abort_reason recorded"
        error = f"slime marked row {element.index} FAILED (a recoverable failure): {reason}"
    elif status_name == "pending":
        error = f"slime handed back row {element.index} still PENDING: it was never generated"
    return Rollout(
        row_index=element.index,
        status=status,
        reward=_reward(element.reward),
        turns=turns_of(element),
        error=error,
    )


def _placeholder(element: list[Any], crashes: CrashLog) -> Rollout:
    inner = element[0] if element else None
    index = getattr(inner, "index", None)
    statuses = [getattr(getattr(sample, "status", None), "name", "?") for sample in element]
    logged = crashes.about(index) if isinstance(index, int) else None
    cause = f"slime logged: {logged}" if logged else "slime logged no cause for it"
    error = (
        f"slime handed back row {index} as a {len(element)}-element list[Sample] (status "
        f"{', '.join(statuses) or 'none'}) where its generate function returned a plain Sample: "
        f"THUDM/slime PR #2078's isolation placeholder, which slime's flattening (by data[0]'s "
        f"shape alone) leaves a list among plain Samples; {cause}"
    )
    return Rollout(row_index=index if isinstance(index, int) else -1, status="aborted", error=error)


def turns_of(sample: Any) -> list[Turn]:
    """The turns slime would train on: each run of loss-mask 1 in the response is one generation."""
    tokens = list(sample.tokens or [])
    length = int(sample.response_length or 0)
    prompt_length = len(tokens) - length
    if length <= 0 or prompt_length < 0:
        return []
    mask = list(sample.loss_mask) if sample.loss_mask is not None else [1] * length
    logprobs = list(sample.rollout_log_probs) if sample.rollout_log_probs is not None else []
    turns = []
    start: int | None = None
    for position in range(length + 1):
        trained = position < length and position < len(mask) and mask[position] == 1
        if trained and start is None:
            start = position
        elif not trained and start is not None:
            turns.append(
                Turn(
                    prompt_token_ids=tokens[: prompt_length + start],
                    generation_token_ids=tokens[prompt_length + start : prompt_length + position],
                    generation_log_probs=logprobs[start:position],
                )
            )
            start = None
    return turns


def _reward(value: Any) -> float:
    """The reward as slime trains it (``torch.tensor(raw_rewards, dtype=torch.float)``: a bool is 1.0
    or 0.0 like any number); ``None``, a row never scored, only ever one left out of the train
    data, is the protocol's unscored 0.0."""
    return 0.0 if value is None else float(value)


class CrashLog(logging.Handler):
    """What slime's rollout logger says (warnings and worse) while a collection runs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def about(self, index: int) -> str | None:
        """The first message naming sample ``idx={index}`` (PR #2078 logs each crash so)."""
        for record in self.records:
            message = record.getMessage()
            found = _CRASH_INDEX.search(message)
            if found is not None and int(found.group(1)) == index:
                return message
        return None
