"""The collector-under-test contract: rows in, one Rollout per row out.

ARCHITECTURE.md#rollout-data and #the-collector-contract state it.

A trainer's collector is adapted to ``Collector``; ``factory(ctx)`` builds it from a
``CollectorContext`` holding what a trainer has (the Gym client, the policy URL, the
environment, the tokenizer, deadlines and the History). Nothing here does any work.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, cast, runtime_checkable

from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.history import History

Row = Mapping[str, Any]
"""A NeMo Gym row, unchanged: ``responses_create_params``, ``agent_ref``, ``_rowidx``, task keys."""

Mode = Literal["train", "validation"]
Style = Literal["gym", "native"]
RolloutStatus = Literal["completed", "truncated", "aborted"]
MODES: Final[tuple[Mode, ...]] = ("train", "validation")
STYLES: Final[tuple[Style, ...]] = ("gym", "native")
STATUSES: Final = ("completed", "truncated", "aborted")


@dataclass(frozen=True, slots=True)
class Turn:
    """One model call: what the model saw, what it produced, and the logprobs it reported."""

    prompt_token_ids: list[int]
    generation_token_ids: list[int]
    generation_log_probs: list[float]


@dataclass(frozen=True, slots=True)
class LossReduction:
    """How the trainer reduces its loss over a batch, as far as one sample's weight goes."""

    per_token: bool
    """True when the loss is a mean over the loss-mask tokens of the batch (or of each mini-batch):
    a sample whose loss mask is all zero adds to neither the sum nor its divisor. False when every
    sample counts whatever its mask (a mean over sequences or prompts, a fixed length)."""
    setting: str
    """The trainer's setting that decides it, as a user looks it up (``trainer.algorithm.loss_reduction
    = 'token_mean'``)."""


@dataclass(frozen=True, slots=True)
class Rollout:
    """The outcome of one requested row; there is always exactly one per row."""

    row_index: int
    status: RolloutStatus
    reward: float = 0.0
    turns: list[Turn] = field(default_factory=list)
    error: str | None = None
    attempts: int = 1
    in_train_batch: bool | None = None
    """Whether the trainer hands this rollout to training as a sample (it is in the train batch);
    None when the collector does not say. ``train_batch_sound`` judges the rollouts marked True."""
    loss_mask: list[int] | None = None
    """For a sample in the train batch: the trainer's loss mask over its response tokens, as the
    batch holds it (1: the token's loss counts); None when the collector does not say."""
    loss_reduction: LossReduction | None = None
    """For a sample in the train batch: how the trainer reduces the loss over the batch; None when
    the collector does not say. With ``loss_mask``, what shows an aborted sample inert."""


@dataclass(frozen=True, slots=True)
class CollectorSettings:
    """Deadlines and limits a collector is configured with (a trainer's rollout config)."""

    request_timeout_s: float = 30.0
    collect_timeout_s: float = 120.0
    policy_ready_timeout_s: float = 60.0
    max_concurrency: int = 16
    max_logprob_attempts: int = 3
    max_aborted_fraction: float = 0.5
    style: Style = "gym"
    max_turns: int = 4
    max_new_tokens: int = 16
    temperature: float = 1.0
    stop: tuple[str, ...] = ()
    """The stop strings the scenario asks every generation to end at, kept in the text
    (``stack.policy.stop``): the Gym model server adds them to the agents' calls; a collector that
    generates itself and declares ``sets_stop`` puts them in its own sampling parameters."""
    trainer_config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The scenario's ``workload.trainer_config``: ``trainer.dotted.key -> value``, the only upstream
    settings an adapter may change from the trainer's own defaults (``adapters.settings``)."""

    def __post_init__(self) -> None:
        for name in ("request_timeout_s", "collect_timeout_s", "policy_ready_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"CollectorSettings.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("max_concurrency", "max_logprob_attempts", "max_turns", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"CollectorSettings.{name} must be >= 1, got {getattr(self, name)!r}")
        if not 0.0 <= self.max_aborted_fraction <= 1.0:
            raise ValueError(
                f"CollectorSettings.max_aborted_fraction must be in [0, 1], got {self.max_aborted_fraction!r}"
            )
        if self.style not in STYLES:
            raise ValueError(f"CollectorSettings.style must be one of {STYLES}, got {self.style!r}")
        for key in self.trainer_config:
            if not isinstance(key, str) or "." not in key:
                raise ValueError(
                    f"CollectorSettings.trainer_config keys are 'trainer.dotted.key', got {key!r}"
                )


class GymRunner(Protocol):
    """NeMo Gym's RolloutCollectionHelper contract: one awaitable per row, completion order."""

    def run_examples(
        self, rows: Sequence[Row]
    ) -> Iterator[Awaitable[tuple[dict[str, Any], dict[str, Any]]]]: ...


class Environment(Protocol):
    """NeMo RL's EnvironmentInterface, async: one batched ``step`` per call, per-row ``verify``."""

    async def step(self, message_logs: list[list[dict[str, Any]]], metadata: list[Any]) -> Any: ...

    async def verify(self, row: Row, response: Mapping[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class CollectorContext:
    """What a trainer gives its collector; built fresh per test by ``chaos_collector_context``."""

    gym: GymRunner
    policy: str
    env: Environment | None
    tokenizer: Any
    settings: CollectorSettings
    history: History
    model: str = "tiny"
    eos_token_ids: tuple[int, ...] = ()
    model_dir: Path | None = None
    """The policy's model directory (HF layout), for collectors that load the tokenizer as a trainer does."""
    resources_url: str | None = None
    """The resources server (NeMo Gym's ``/seed_session``, tools, ``/verify``) through the
    ``collector->resources`` link, the one ``env`` talks to: for a trainer's own environment that
    calls the tools and the verifier itself."""
    placement: Mapping[str, str] = field(default_factory=dict)
    """Where each server runs when that is not this machine's plain process (``--rollout-chaos-ray``:
    ``calculator_agent`` -> ``node 1 (ray node 3f2a9c01)``), for errors that name the node a row was on."""
    head_url: str | None = None
    """The head server, whose ``/global_config_dict_yaml`` lists every server at the end of its
    link: where NeMo Gym's own client (the ``nemo_gym`` target) learns the stack."""
    gym_python: Path | None = None
    """The NeMo Gym interpreter the run was given (``--rollout-chaos-gym-python``), for a collector
    that runs NeMo Gym's own code; None: ``servers.nemo_gym.locate`` looks for one."""


@runtime_checkable
class Collector(Protocol):
    """The collector under test. Raising is a valid answer to some scenarios (short count).

    A collector may also declare the workload styles it supports, as a class attribute
    ``styles = ("gym",)`` (or ``("native",)``, or both, the default), and likewise the modes,
    ``modes = ("validation",)``. A scenario of a style or mode the collector does not declare is
    skipped with that reason instead of being judged.
    """

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]: ...


CollectorFactory = Callable[[CollectorContext], Collector]


class CollectionError(RuntimeError):
    """The collection as a whole failed; the message says what was requested and what broke."""


class ShortCountError(CollectionError):
    """The Gym client produced fewer results than rows were requested."""


class InfrastructureError(CollectionError):
    """An agent or server cannot be reached: retrying would hang, so the collection fails fast."""


class TooManyAbortedError(CollectionError):
    """More rollouts were aborted than the configured bound allows."""


class EmptyTrainBatchError(CollectionError):
    """Rollouts completed, but none is left to train on: each is in a group left out whole."""


def supported_styles(collector: object) -> tuple[Style, ...]:
    """The styles ``collector`` (or its class, or its factory) declares in ``styles``; all by default.

    Raise ``CollectorTargetError`` when ``styles`` is not a tuple or list of known styles.
    """
    return cast("tuple[Style, ...]", _declared(collector, "styles", STYLES, "gym"))


def supported_modes(collector: object) -> tuple[Mode, ...]:
    """The modes ``collector`` (or its class, or its factory) declares in ``modes``; both by default.

    Raise ``CollectorTargetError`` when ``modes`` is not a tuple or list of known modes.
    """
    return cast("tuple[Mode, ...]", _declared(collector, "modes", MODES, "train"))


def _declared(collector: object, attribute: str, known: tuple[str, ...], example: str) -> tuple[str, ...]:
    declared = getattr(collector, attribute, None)
    if declared is None:
        return known
    if not isinstance(declared, tuple | list) or not declared or any(item not in known for item in declared):
        owner = collector if isinstance(collector, type) else type(collector)
        raise CollectorTargetError(
            f"{owner.__name__}.{attribute} is {declared!r}; valid: a tuple of "
            f'{", ".join(map(repr, known))}, such as {attribute} = ("{example}",)'
        )
    return tuple(declared)


def row_index(row: Row, position: int) -> int:
    """The row's ``_rowidx``, or its position in the request when it has none."""
    value = row.get("_rowidx")
    return value if isinstance(value, int) else position
