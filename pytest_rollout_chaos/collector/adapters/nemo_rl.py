"""The ``nemo_rl`` adapter: NeMo RL's real NeMo Gym rollout path against the stack.

Train mode runs, from the tree ``--rollout-chaos-upstream`` names (or the installed package):
the trainer-side caller (``nemo_rl.experience.rollouts.run_async_nemo_gym_rollout``, or
``run_nemo_gym_rollout_sync`` on trees whose actor streams its rows) and, under it, the actor
method ``NemoGym.run_rollouts`` with NeMo RL's own postprocessing, NaN check (a retry of the
batch before #3000, a raise after), ordering and metrics. Which API a tree has is read from it
at run time: a ``run_rollouts`` that is an async generator is consumed as Ray's
``num_returns="streaming"``, else it returns one list.

Real: everything of NeMo RL above; a ``transformers`` tokenizer over the policy's tokenizer; and,
where ``nemo_gym`` imports in this interpreter, NeMo Gym's own client (``nemo_rl_gym``): the
actor's ``rch`` is NeMo Gym's ``RolloutCollectionHelper()`` and its ``head_server_config`` is NeMo
Gym's ``BaseServerConfig`` of the stack's head server, as ``_spinup`` sets them, built in the
process the actor runs in. What that stands in for is ``RunHelper.start`` only: the stack's servers
run already. Where ``nemo_gym`` does not import, the Gym client is the harness's (``ctx.gym``,
NeMo Gym 0.4's transport) behind NeMo Gym's ``run_examples(examples=..., head_server_config=...)``
signature, a stand-in the report says it is (``gym_client``).

With Ray on (this process called ``ray.init``, as ``--rollout-chaos-ray`` does), the actor is a
real Ray actor of the tree's ``NemoGym`` and the caller uses the real Ray; ``nemo_rl_actor``
says what is real and what is faked then. Without Ray:

Faked, as NeMo RL's own CPU tests fake them (``tests/unit/environments/test_nemo_gym.py`` and
``tests/unit/experience/test_rollouts.py``): the Ray actor (the plain class from
``NemoGym.__ray_metadata__.modified_class``; the spin-up that would start Gym servers is skipped,
our stack runs them, and what it would set is set by ``nemo_rl_trainer``), its handle
(``.remote()`` runs the method on the collection's event loop) and ``ray.get`` (waits for that).
Arguments and results pass by reference, not through Ray's serializer, and an actor's exception
reaches the caller as itself, not wrapped in ``RayTaskError``. A real Ray actor runs in another
process, away from this History and from ``ctx.gym`` (the client the ``short_results`` fault arms),
which it then reaches through a relay (NeMo Gym's own client there only records its calls and asks
for the short count over it), and ``ray.init`` costs tens of seconds of a small CI box: so Ray is
opt-in.

The caller blocks in ``ray.get``, so it runs on a worker thread while the actor's coroutine
runs on the event loop, as a trainer's driver blocks while the actor's loop works.

Past the rollout, ``nemo_rl_train_batch`` runs ``grpo_train``'s own steps on the caller's result
(rewards, baselines, dynamic sampling, loss masks, the flat ``train_data``, advantages) to what
``policy.train`` would get, through the copy of its lines that the tree's ``grpo_train`` needs
(one per version; none fits, and train mode declines as not judged); that copy's ``STOOD_IN`` (the
inline lines, the policy's workers) is recorded with the call, and it builds the master config
as the tree types it (a dict before #3000, NeMo RL's ``MasterConfig`` after), from which it also
gives the caller what ``grpo_train`` gives it. Where ``grpo_train`` asks the policy for
``prev_logprobs``, the policy's own weights score the sequences (``nemo_rl_policy``, loaded once
per collector from the stack's model directory), so NeMo RL's sequence-logprob error masking acts
on a real disagreement between generation and policy, at the threshold the scenario's
``trainer_config`` gives (``nemo_rl.grpo.seq_logprob_error_threshold``: 2 in NeMo Gym's
``grpo_nanov3.yaml``; otherwise ``grpo_math_1B.yaml``'s null, which only measures). What NeMo RL
raises there is what ``collect`` raises.

Mapping, one Rollout per row, read from that ``train_data`` (input order): the flat tokens, loss
mask and generation logprobs, cut at message boundaries into one Turn per message in the loss
mask (its prompt every token before it); the reward the advantages were computed from;
``truncated`` from the batch; every row ``in_train_batch``, its ``loss_mask`` the loss's (all zero
for a row NeMo RL masked out). NeMo RL has no per-row failure, so no
rollout is ever aborted: whatever fails, fails the batch, and this collector raises what NeMo RL
raised (on the pre-#2394 tree a row the Gym never returned is a ``None`` slot and the caller's
``TypeError``). A row missing from the batch stays missing.

Groups: the batch holds one datum per prompt (the workload's rows are each prompt repeated
``generations_per_prompt`` times, consecutively), repeated ``grpo.num_generations_per_prompt``
times with ``repeat_interleave`` as ``grpo_train`` does; the caller numbers the rows' ``_rowidx``
by position, as ours are.

Validation mode is ``nemo_rl_validation.collect``; native style in train mode (NeMo RL's
``run_multi_turn_rollout``) is not driven and skips, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from types import ModuleType
from typing import Any, ClassVar, Final

from pytest_rollout_chaos.collector.adapters import nemo_rl_gym, nemo_rl_policy, nemo_rl_settings, own_gym
from pytest_rollout_chaos.collector.adapters import nemo_rl_train_batch as train_batch
from pytest_rollout_chaos.collector.adapters.nemo_rl_actor import (
    RayActor,
    RecordedHandle,
    ray_in_use,
)
from pytest_rollout_chaos.collector.adapters.nemo_rl_ray import ActorHandle, in_thread, ray_get_faked
from pytest_rollout_chaos.collector.adapters.nemo_rl_relay import GymRelay
from pytest_rollout_chaos.collector.adapters.nemo_rl_trainer import (
    GROUP_SIZE,
    GymHelper,
    load_trainer,
    trainer_tokenizer,
    trainer_warnings,
)
from pytest_rollout_chaos.collector.adapters.upstream import Upstream
from pytest_rollout_chaos.collector.groups import group_size
from pytest_rollout_chaos.collector.protocol import (
    Collector,
    CollectorContext,
    Mode,
    Rollout,
    Row,
    Style,
)
from pytest_rollout_chaos.errors import NotJudgedError

GYM_CLIENT: Final = (
    "stand-in: the harness's GymClient (ctx.gym) behind NeMo Gym's RolloutCollectionHelper.run_examples; "
    "NeMo Gym's own nemo_gym.rollout_collection.RolloutCollectionHelper is not run"
)
"""What plays NeMo Gym's client where ``nemo_gym`` does not import (``gym_client`` says which ran)."""


def gym_client(nemo_gym: str | None) -> str:
    """What plays NeMo Gym's client where NeMo Gym ``nemo_gym`` is installed (None: none is):
    NeMo Gym's own where it imports, else ``GYM_CLIENT`` (``adapters.gym_client`` asks)."""
    return nemo_rl_gym.described(nemo_gym) if nemo_gym else GYM_CLIENT


UPSTREAM = Upstream(
    adapter="nemo_rl",
    modules=("nemo_rl.environments.nemo_gym", "nemo_rl.experience.rollouts"),
    install=(
        "pip install torch==2.13.0 numpy pillow requests typing_extensions transformers==5.5.4 "
        "ray==2.60.0 datasets fastapi uvicorn pyzmq rich tqdm wandb decord tensordict"
    ),
)
SOURCE: Final = "collector"
READ_OUT: Final = "the train_data grpo_train hands policy.train"
"""Where the Rollouts of a train step are read from (``upstream_calls``)."""
CANNOT_COMBINE: Final[dict[tuple[Style, Mode], str]] = {
    ("native", "train"): (
        "native-style train mode is NeMo RL's run_multi_turn_rollout, which the nemo_rl adapter does not "
        "drive; its train mode is the NeMo Gym path (gym style)"
    ),
    ("gym", "validation"): (
        "gym-style validation is NeMo RL's run_async_nemo_gym_rollout, the NeMo Gym caller the nemo_rl "
        "adapter drives in train mode; its validation mode drives validate()'s native rollouts"
    ),
}
"""The style and mode pairs the adapter has no NeMo RL path for (the fit step skips them)."""
RAY_ONE_COLLECTION: Final = (
    "with Ray on, the adapter ends NeMo RL's NemoGym actor with each collection and starts the next "
    "one inside the next collection's deadline, blocking the event loop while it starts; NeMo RL keeps "
    "one actor across steps, so a next step here would judge the adapter's restart, not the trainer"
)


# -- the collector ------------------------------------------------------------------------------


class NemoRLCollector:
    """Train mode through NeMo RL's NeMo Gym caller; validation mode through ``nemo_rl_validation``."""

    styles: ClassVar[tuple[Style, ...]] = ("gym", "native")
    modes: ClassVar[tuple[Mode, ...]] = ("train", "validation")
    cannot_combine: ClassVar[dict[tuple[Style, Mode], str]] = CANNOT_COMBINE
    numbers_rows: ClassVar[str] = (
        "NeMo RL stamps each row it sends NeMo Gym with its position in the batch "
        '(nemo_rl/experience/rollouts.py, row["_rowidx"] = row_index)'
    )
    helper_class: ClassVar[type[GymHelper]] = GymHelper
    max_collections: int | None = None  # one with Ray on (__init__): its actor ends with each collection
    max_collections_why: ClassVar[str] = RAY_ONE_COLLECTION
    own_concurrency: ClassVar[str] = (
        "NeMo RL hands NeMo Gym's run_examples the whole batch, with no semaphore (NemoGym.run_rollouts)"
    )

    def __init__(self, ctx: CollectorContext) -> None:
        self._ctx = ctx
        nemo_rl_settings.settings(ctx)  # a trainer_config key the adapter does not hand NeMo RL: say so now
        # Imported and loaded here, before any deadline runs: the first import of NeMo RL takes
        # seconds, and the event loop would stand still for them inside the collection.
        self._trainer = load_trainer()
        self._tokenizer = trainer_tokenizer(ctx)
        self._settings = nemo_rl_settings.train(
            ctx, _max_model_len(self._tokenizer), nan_retry_knob=self._trainer.nan_retry_knob
        )
        self._master_config: Any = {}
        # The policy's own model, for grpo_train's prev_logprobs: loaded once, off any deadline.
        self._policy: nemo_rl_policy.PolicyLogprobs | None = None
        with trainer_warnings(), contextlib.suppress(Exception):  # collect raises it, if it fails
            self._policy = self._load_policy()
        _preload_validation()
        with trainer_warnings(), contextlib.suppress(Exception):  # collect raises it, if it fails
            train_batch.load_grpo()
        self._stale_copy = train_batch.COPIED.stale()  # train mode declines on such a tree
        # NeMo Gym's own client where it imports and there is a head server for it to ask (a context
        # over a canned Gym client names none): its version, else None for the stand-in.
        self._own_gym = own_gym.version() if ctx.head_url is not None else None
        # With Ray on, NemoGym is a real actor, started here for the same reason (nemo_rl_actor).
        self._ray = ray_in_use()
        if self._own_gym is not None and self._ray is None:  # built here at collection: imported now
            own_gym.preload()
        self._actor = self._start_actor() if self._ray is not None else None
        if self._ray is not None:  # the fit step skips more collections in a row, saying why
            self.max_collections = 1

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        try:
            return await self._collect(rows, mode=mode)
        finally:
            await self._kill_actor()

    async def _collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        if mode == "validation":
            return await _validation(self._ctx, rows)
        if self._stale_copy is not None:
            raise NotJudgedError(self._stale_copy)
        step = train_batch.step()
        history = self._ctx.history
        size = group_size(rows, setting=GROUP_SIZE)
        config = nemo_rl_settings.train_step(
            self._settings, prompts=len(rows) // size, generations=size, rows=step.SETTINGS, where=step.WHERE
        )
        with trainer_warnings():
            self._master_config = step.master_config(config, train_batch.load_grpo())
        self._settings.record(history, mode="train")
        history.append(SOURCE, "invoke", "collect", {"rows": len(rows), "mode": mode, "style": "gym"})
        try:
            rollouts = await self._train(rows, step)
        except BaseException as error:
            history.append(SOURCE, "fail", "collect", {"error": f"{type(error).__name__}: {error}"})
            raise
        history.append(SOURCE, "ok", "collect", {"returned": len(rollouts)})
        return rollouts  # type: ignore[return-value]  # None entries: rows NeMo RL lost, left visible

    async def _train(self, rows: Sequence[Row], step: ModuleType) -> list[Rollout | None]:
        trainer = self._trainer
        extra = step.caller_kwargs(train_batch.load_grpo(), self._master_config)
        # Without Ray the actor runs here, so NeMo Gym's client is built here; with Ray, in its worker.
        here = self._own_gym is not None and self._ray is None
        own = own_gym.own_client(self._ctx.head_url, adapter="nemo_rl") if here else None
        helper = self.helper_class(self._ctx, own=own)
        self._ctx.history.append(SOURCE, "info", "upstream", self._gym_client_facts())
        name = f"{trainer.caller.__module__}.{trainer.caller.__name__}"
        data = {"call": name, "api": "streaming" if trainer.streaming else "list", "rows": len(rows)}
        try:
            async with self._actor_handle(helper) as handle:
                call = trainer.caller_call(
                    self._ctx, rows, handle, self._tokenizer, self._settings, extra=extra
                )
                self._ctx.history.append(SOURCE, "invoke", "upstream", data)
                with trainer_warnings():
                    result = await in_thread(asyncio.get_running_loop(), call)
        except BaseException as error:
            self._ctx.history.append(
                SOURCE, "fail", "upstream", {"call": name, "error": f"{type(error).__name__}: {error}"}
            )
            raise
        self._ctx.history.append(SOURCE, "ok", "upstream", {"call": name})
        rollouts = self.read(rows, result, step, attempts=max(1, helper.calls))
        for rollout in rollouts:
            if rollout is not None:
                self._ctx.history.append(
                    SOURCE, "info", "rollout", {"row": rollout.row_index, "status": rollout.status}
                )
        return rollouts

    def read(
        self, rows: Sequence[Row], result: Any, step: ModuleType, *, attempts: int
    ) -> list[Rollout | None]:
        """The Rollouts of the step: read from the ``train_data`` ``grpo_train`` makes of the
        caller's result for ``policy.train``; what NeMo RL raises on the way is raised, unchanged."""
        history = self._ctx.history
        call = {
            "call": f"{train_batch.GRPO_MODULE}.grpo_train, rollout to policy.train",
            "copy": step.__name__,
        }
        history.append(
            SOURCE, "invoke", "upstream", {**call, "stood_in": list(step.STOOD_IN), "read_out": READ_OUT}
        )
        try:
            with trainer_warnings():
                if self._policy is None:
                    self._policy = self._load_policy()
                batch = train_batch.train_batch(
                    step, result, self._master_config, self._tokenizer, self._policy
                )
        except BaseException as error:
            history.append(SOURCE, "fail", "upstream", {**call, "error": f"{type(error).__name__}: {error}"})
            raise
        samples = 0 if batch.train_data is None else len(batch.train_data["input_ids"])
        history.append(SOURCE, "ok", "upstream", {**call, "samples": samples, "complete": batch.complete})
        return train_batch.rollouts(rows, batch, attempts=attempts)

    def _load_policy(self) -> nemo_rl_policy.PolicyLogprobs:
        temperature = nemo_rl_settings.temperature(self._settings)
        return nemo_rl_policy.load(self._ctx.model_dir, temperature=temperature)

    @contextlib.asynccontextmanager
    async def _actor_handle(self, helper: GymHelper) -> AsyncIterator[Any]:
        """The handle NeMo RL's caller gets: the real actor's with Ray on, else the stand-in's."""
        if self._ray is None:
            loop = asyncio.get_running_loop()
            actor = self._trainer.actor(helper, self._tokenizer, self._settings)
            handle = ActorHandle(actor, loop, self._remote_called)
            try:
                with ray_get_faked(self._trainer.rollouts):
                    yield handle
            finally:
                handle.cancel_pending()
                if helper.own is not None:  # the actor's process would end here: so does its client
                    await own_gym.end_process_client()
            return
        if self._actor is None:  # a second collection: its actor starts within the deadline
            self._actor = self._start_actor()
        async with GymRelay(helper).serving() as relay:
            rch = nemo_rl_gym.InActor(self._ctx.head_url, relay) if self._own_gym is not None else relay
            try:
                await self._actor.install(rch)
                yield RecordedHandle(self._actor.handle, self._actor.class_name, self._remote_called)
            finally:  # before the relay closes: a caller blocked in ray.get hears the actor died
                await self._kill_actor()

    def _gym_client_facts(self) -> dict[str, Any]:
        """What plays NeMo Gym's client in this collection, for the History."""
        if self._own_gym is None:
            return {"call": "RolloutCollectionHelper", "client": "stand-in over ctx.gym"}
        return {
            "call": "nemo_gym.rollout_collection.RolloutCollectionHelper()",
            "client": "NeMo Gym's own",
            "nemo_gym": self._own_gym,
            "built_in": "this process" if self._ray is None else "the actor's worker",
            "head_server_config": self._ctx.head_url,
        }

    def _start_actor(self) -> RayActor:
        trainer, ctx = self._trainer, self._ctx
        helper = self.helper_class(ctx)  # for its head_server_config: the stack's head server
        return RayActor(
            self._ray,
            trainer.remote_class,
            tree=trainer.root,
            cfg=nemo_rl_settings.actor_cfg(self._settings),
            head_server_config=helper.head_server_config,
            max_attempts=nemo_rl_settings.nan_retries(self._settings),
            tokenizer=self._tokenizer,
            history=ctx.history,
        )

    async def _kill_actor(self) -> None:
        actor, self._actor = self._actor, None
        if actor is not None:
            await actor.kill()

    def _remote_called(self, method: str, options: dict[str, Any]) -> None:
        # Called from the caller's thread; the History is thread-safe.
        self._ctx.history.append(SOURCE, "info", "upstream", {"call": f"{method}.remote", **options})


def factory(ctx: CollectorContext) -> Collector:
    """``--rollout-chaos-target=nemo_rl``."""
    return NemoRLCollector(ctx)


async def _validation(ctx: CollectorContext, rows: Sequence[Row]) -> list[Rollout]:
    from pytest_rollout_chaos.collector.adapters import nemo_rl_validation

    return await nemo_rl_validation.collect(ctx, rows)


def _preload_validation() -> None:
    """``validate()``'s modules, imported off any deadline (they take seconds the first time)."""
    from pytest_rollout_chaos.collector.adapters import nemo_rl_validation

    nemo_rl_validation.preload()


def _max_model_len(tokenizer: Any) -> int:
    """The engine's context length as NeMo RL reads it (``vllm_cfg.max_model_len``): the model's."""
    length = getattr(tokenizer, "model_max_length", None)
    return int(length) if isinstance(length, int) and 0 < length < 1_000_000_000 else 4096
