"""The ``nemo_rl`` adapter's validation mode: NeMo RL's own ``grpo.validate()`` against the stack.

Real, from the tree ``--rollout-chaos-upstream`` names: ``nemo_rl.algorithms.grpo.validate``
under NeMo RL's own defaults (``nemo_rl_settings``), so the rollout function it calls by default
(``run_multi_turn_rollout``), or, when the scenario sets
``nemo_rl.policy.generation.vllm_cfg.async_engine: true``, whichever async one it calls at that
commit (``run_async_multi_turn_rollout`` before PR #2209, ``run_multi_turn_rollout_async_generation``
at its head) and, under it, ``calculate_rewards``, the message logs and the rewards; the
dataloader (``StatefulDataLoader`` with ``rl_collate_fn``); the tokenizer (``get_tokenizer`` over
the model directory the policy serves). No rollout function is named here: every function
``grpo`` took from ``nemo_rl.experience`` is wrapped, passing through, so the one ``validate()``
called is recorded (an ``upstream`` event) and the batch it returned is read back.

The policy generation and the environments are adapter-side implementations of NeMo RL's
interfaces over our servers, and ``ray.get`` is faked for the environment calls as NeMo RL's
CPU tests fake it (``nemo_rl_interfaces``): no Ray cluster runs and nothing is serialized. Rows
become datums as NeMo RL's data processors make them: the row's input and tools rendered with
the model's chat template as one user message, the row as ``extra_env_info``, its task
(``native.task_of``) as ``task_name``.

``validate()`` blocks (its rollout functions call ``asyncio.run`` and ``ray.get``), so it runs on a
worker thread while the environment calls run on the collection's event loop. Mapping, one
Rollout per entry of the returned batch (input order): one Turn per assistant message, its
prompt every token before it in the message log, its logprobs ``generation_logprobs``; the reward
``total_reward``; ``truncated`` from the batch. NeMo RL has no per-row failure: a sample whose
generation failed keeps the turns it had (perhaps none), and what fails the batch is raised as
``validate()`` raised it.

Gym-style validation is NeMo RL's ``run_async_nemo_gym_rollout``, the caller train mode drives:
such a scenario skips, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import importlib
import inspect
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final, cast

import aiohttp

from pytest_rollout_chaos.collector.adapters import nemo_rl_settings
from pytest_rollout_chaos.collector.adapters.nemo_rl_grpo import load_grpo, typed_config
from pytest_rollout_chaos.collector.adapters.nemo_rl_interfaces import (
    EnvHandle,
    HttpGeneration,
    Stop,
    on_worker_thread,
    policy_root,
    ray_get_resolves,
)
from pytest_rollout_chaos.collector.adapters.upstream import Upstream
from pytest_rollout_chaos.collector.native import chat_tools, initial_messages, task_of
from pytest_rollout_chaos.collector.protocol import (
    CollectionError,
    CollectorContext,
    Environment,
    Rollout,
    Row,
    Turn,
    row_index,
)
from pytest_rollout_chaos.errors import CollectorTargetError

SOURCE: Final = "collector"
VALIDATE: Final = "nemo_rl.algorithms.grpo.validate"
ROLLOUT_PACKAGE: Final = "nemo_rl.experience"
UPSTREAM: Final = Upstream(
    adapter="nemo_rl",
    modules=("nemo_rl.algorithms.grpo",),
    install=(
        "pip install torchdata mlflow-skinny swanlab matplotlib prometheus-client tensorboard "
        "megatron-core hydra-core (beside the nemo_rl adapter's own packages)"
    ),
)
_PATCHING: Final = threading.Lock()  # ray.get and grpo's globals are swapped while one validation runs


def preload() -> None:
    """Import ``validate()``'s modules now, off any collection's deadline (a factory calls this);
    if they cannot be imported, ``collect`` says so when a validation runs."""
    with trainer_warnings(), contextlib.suppress(Exception):
        NemoRL.load()


async def collect(ctx: CollectorContext, rows: Sequence[Row]) -> list[Rollout]:
    """NeMo RL's ``validate()`` over ``rows``; one Rollout per entry of the batch it rolled out."""
    return await Validation(ctx).collect(rows)


@dataclass(frozen=True, slots=True)
class ValidateCall:
    """What ``validate()`` is given, all but ``step`` and ``logger``."""

    policy_generation: Any
    val_dataloader: Any
    tokenizer: Any
    val_task_to_env: dict[str, EnvHandle]
    master_config: Any  # a dict, or NeMo RL's MasterConfig after #3000 (nemo_rl_grpo.typed_config)


class Validation:
    """One validation: NeMo RL's inputs built on a worker thread, then ``drive``."""

    def __init__(self, ctx: CollectorContext) -> None:
        self.ctx = ctx

    async def collect(self, rows: Sequence[Row]) -> list[Rollout]:
        env = self.ctx.env
        if env is None:
            raise CollectorTargetError(
                "nemo_rl validation steps the batched environment; the context has none"
            )
        history = self.ctx.history
        history.append(
            SOURCE, "invoke", "collect", {"rows": len(rows), "mode": "validation", "style": "native"}
        )
        try:
            card = await policy_card(self.ctx)
            stop = Stop()
            loop = asyncio.get_running_loop()
            with trainer_warnings():
                batch = await on_worker_thread(lambda: self._run(rows, card, env, loop, stop), stop)
            rollouts = rollouts_from_batch(batch, rows)
        except BaseException as error:
            history.append(SOURCE, "fail", "collect", {"error": f"{type(error).__name__}: {error}"})
            raise
        for rollout in rollouts:
            history.append(SOURCE, "info", "rollout", {"row": rollout.row_index, "status": rollout.status})
        history.append(SOURCE, "ok", "collect", {"returned": len(rollouts)})
        return rollouts

    def _run(
        self,
        rows: Sequence[Row],
        card: PolicyCard,
        env: Environment,
        loop: asyncio.AbstractEventLoop,
        stop: Stop,
    ) -> Any:
        """On the worker thread: NeMo RL's inputs, then ``drive`` with the Ray seam in place."""
        UPSTREAM.require()
        nemo = NemoRL.load()
        tokenizer = nemo.tokenizer(card.model_dir)
        taken, config = nemo_rl_settings.validation(
            self.ctx, rows=len(rows), max_model_len=card.max_model_len, pad_token_id=tokenizer.pad_token_id
        )
        taken.record(self.ctx.history, mode="validation", variant=nemo_rl_settings.variant(config))
        envs = {
            task: EnvHandle(
                task, ctx=self.ctx, env=env, loop=loop, stop=stop, environment_return=nemo.environment_return
            )
            for task in sorted({task_of(row) for row in rows})
        }
        datums = [datum(row, position, tokenizer) for position, row in enumerate(rows)]
        call = ValidateCall(
            policy_generation=nemo.generation_class()(self.ctx, config["policy"]["generation"], stop),
            val_dataloader=nemo.dataloader(
                datums, batch_size=len(rows), shuffle=False, collate_fn=nemo.collate
            ),
            tokenizer=tokenizer,
            val_task_to_env=envs,
            master_config=typed_config(nemo.grpo, config),
        )
        with _PATCHING, ray_get_resolves(nemo.ray):
            return self.drive(nemo, call)

    def drive(self, nemo: NemoRL, call: ValidateCall) -> Any:
        """``grpo.validate`` itself; the batch is what the rollout function it called returned."""
        calls: list[tuple[str, Any]] = []
        with observing_rollouts(nemo.grpo, self.ctx, calls):
            nemo.grpo.validate(
                policy_generation=call.policy_generation,
                val_dataloader=call.val_dataloader,
                tokenizer=call.tokenizer,
                val_task_to_env=call.val_task_to_env,
                step=0,
                master_config=call.master_config,
                logger=None,
            )
        batches = [batch for _, result in calls if (batch := final_batch(result)) is not None]
        if len(batches) != 1:
            called = [name for name, _ in calls] or "none"
            raise CollectionError(
                f"{VALIDATE} rolled out {len(batches)} batches where its dataloader held one "
                f"(rollout functions it called: {called})"
            )
        return batches[0]


@contextlib.contextmanager
def trainer_warnings() -> Iterator[None]:
    """NeMo RL's warnings and its dependencies' (torch, torchdata, megatron) stay warnings under a test
    suite's ``filterwarnings = error``, as in a training run: they are not the collection's outcome.
    Warning filters are the process's: entered and left on the event loop's thread, around the
    worker thread's whole run, they nest within the test's own."""
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        yield


@dataclass(frozen=True, slots=True)
class NemoRL:
    """The NeMo RL modules one validation uses, imported from the tree on ``sys.path``."""

    grpo: ModuleType
    ray: Any  # the ray module
    batches: Any  # BatchedDataDict
    interface: type  # GenerationInterface
    environment_return: Any  # EnvironmentReturn
    collate: Callable[..., Any]  # rl_collate_fn
    dataloader: Any  # StatefulDataLoader
    get_tokenizer: Callable[..., Any]
    rollouts: ModuleType

    @classmethod
    def load(cls) -> NemoRL:
        module = importlib.import_module
        return cls(
            grpo=load_grpo(),
            ray=module("ray"),
            batches=module("nemo_rl.distributed.batched_data_dict").BatchedDataDict,
            interface=module("nemo_rl.models.generation.interfaces").GenerationInterface,
            environment_return=module("nemo_rl.environments.interfaces").EnvironmentReturn,
            collate=module("nemo_rl.data.collate_fn").rl_collate_fn,
            dataloader=module("torchdata.stateful_dataloader").StatefulDataLoader,
            get_tokenizer=module("nemo_rl.algorithms.utils").get_tokenizer,
            rollouts=module("nemo_rl.experience.rollouts"),
        )

    def tokenizer(self, model_dir: Path) -> Any:
        """NeMo RL's ``get_tokenizer`` over the model directory: its chat template, pad = EOS if none."""
        return self.get_tokenizer({"name": str(model_dir)})

    def generation_class(self) -> type[HttpGeneration]:
        """``HttpGeneration`` as a subclass of this tree's ``GenerationInterface``."""
        made = type("HttpPolicyGeneration", (HttpGeneration, self.interface), {"batches": self.batches})
        return cast("type[HttpGeneration]", made)


@dataclass(frozen=True, slots=True)
class PolicyCard:
    """What the policy server says of its model: its context length and where it was loaded from."""

    max_model_len: int
    model_dir: Path


async def policy_card(ctx: CollectorContext) -> PolicyCard:
    """``GET /v1/models``: a trainer configures generation for the model its engine serves."""
    url = f"{policy_root(ctx)}/v1/models"
    timeout = aiohttp.ClientTimeout(total=ctx.settings.request_timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as response:
        response.raise_for_status()
        cards = (await response.json()).get("data") or []
    card = next((card for card in cards if card.get("id") == ctx.model), cards[0] if cards else {})
    model_dir = Path(str(card.get("root") or ""))
    if not card.get("max_model_len") or not (model_dir / "tokenizer_config.json").is_file():
        raise CollectorTargetError(
            f"nemo_rl validation configures generation from the model the policy serves: {url} answered "
            f"root={card.get('root')!r}, max_model_len={card.get('max_model_len')!r}; it needs a local "
            "model directory (for the tokenizer and chat template) and the context length"
        )
    return PolicyCard(int(card["max_model_len"]), model_dir)


def datum(row: Row, position: int, tokenizer: Any) -> dict[str, Any]:
    """A NeMo RL ``DatumSpec`` for one row, as a data processor makes it."""
    text = tokenizer.apply_chat_template(
        initial_messages(row), tools=chat_tools(row) or None, tokenize=False, add_generation_prompt=True
    )
    token_ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids[0]
    return {
        "message_log": [{"role": "user", "content": text, "token_ids": token_ids}],
        "length": len(token_ids),
        "extra_env_info": copy.deepcopy(dict(row)),
        "loss_multiplier": 1.0,
        "idx": row_index(row, position),
        "task_name": task_of(row),
    }


@contextlib.contextmanager
def observing_rollouts(
    grpo: ModuleType, ctx: CollectorContext, calls: list[tuple[str, Any]]
) -> Iterator[None]:
    """Each function ``grpo`` took from ``nemo_rl.experience``, wrapped to record its call and result."""
    originals = {
        name: value
        for name, value in vars(grpo).items()
        if inspect.isfunction(value) and value.__module__.startswith(ROLLOUT_PACKAGE)
    }

    def observed(function: Callable[..., Any]) -> Callable[..., Any]:
        qualified = f"{function.__module__}.{function.__qualname__}"

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            ctx.history.append(SOURCE, "info", "upstream", {"call": qualified, "by": VALIDATE})
            result = function(*args, **kwargs)
            calls.append((qualified, result))
            return result

        return call

    for name, function in originals.items():
        setattr(grpo, name, observed(function))
    try:
        yield
    finally:
        for name, function in originals.items():
            setattr(grpo, name, function)


def final_batch(result: Any) -> Any:
    """The batch in a rollout function's result: ``(batch, metrics)``, or one with ``final_batch``."""
    batch = result[0] if isinstance(result, tuple) and result else getattr(result, "final_batch", None)
    return batch if isinstance(batch, Mapping) and "message_log" in batch else None


def rollouts_from_batch(batch: Mapping[str, Any], rows: Sequence[Row]) -> list[Rollout]:
    """One Rollout per batch entry, in input order; a row the batch lacks stays missing."""
    truncated = batch.get("truncated")
    rewards = batch["total_reward"]
    return [
        Rollout(
            row_index(row, position),
            "truncated" if truncated is not None and bool(truncated[position]) else "completed",
            float(rewards[position]),
            turns_from_message_log(message_log),
        )
        for position, (row, message_log) in enumerate(zip(rows, batch["message_log"], strict=False))
    ]


def turns_from_message_log(message_log: Sequence[Mapping[str, Any]]) -> list[Turn]:
    """One Turn per assistant message; its prompt is every token before it (what the model saw)."""
    seen: list[int] = []
    turns = []
    for message in message_log:
        token_ids = [int(token) for token in message["token_ids"].tolist()]
        if message.get("role") == "assistant":
            logprobs = message.get("generation_logprobs")
            kept = [float(value) for value in logprobs.tolist()] if logprobs is not None else []
            turns.append(Turn(list(seen), token_ids, kept))
        seen.extend(token_ids)
    return turns
