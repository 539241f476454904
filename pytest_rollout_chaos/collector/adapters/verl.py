"""The ``verl`` adapter: the verl NeMo Gym recipe's rollout collection against the stack.

It drives ``NemoGymAgentLoopManager._async_generate_sequences`` from verl-recipe's
``nemo_gym/agent_loop.py`` (PR #80; renamed ``NeMoGymAgentLoopManager`` by #87, unchanged
otherwise; both are found). The recipe is not a package: point
``--rollout-chaos-upstream`` at a verl-recipe checkout. The manager builds one NeMo Gym row
per prompt, awaits ``rch.run_examples`` in completion order, postprocesses each result like
NeMo RL (a contiguity check of the token ids), substitutes its 1-token ``_empty_result`` dummy
(reward 0) for a result it cannot postprocess (a ``ValueError``), raises ``RuntimeError`` when
a row never came back, and packs everything into verl's padded ``DataProto``.

Real: the recipe's code from the prompts ``DataProto`` to the output ``DataProto`` (its dataset
class ``NemoGymJSONLDataset``, verl's ``collate_fn`` and ``DataProto.from_single_dict`` build
the input as a trainer does: ``verl_prompts``); verl's ``AgentLoopWorker._postprocess``; the
tokenizer, from verl's ``HFModelConfig`` over the policy's model directory, as ``_init_nemo_gym``
gets it.

Not real: ``create`` and ``__init__`` (Ray workers, vLLM replicas, NeMo Gym's ``RunHelper``,
the Ray call that applies the server patch) are skipped: the manager is made with
``object.__new__`` and given the attributes ``_init_nemo_gym`` sets, the way verl's CPU tests
build an ``AgentLoopWorker``. ``generate_sequences`` only hops onto the manager's private loop
thread; ``_async_generate_sequences`` is awaited in the collector's own loop instead, where
``ctx.gym`` (NeMo Gym's ``RolloutCollectionHelper`` contract, no deadline, as upstream) lives.
``create`` waits until its vLLM servers answer before the first step; in its place the
collector waits for the policy's ``/health`` once (``policy_ready_timeout_s``).
``rollout_config`` holds verl's own defaults (``verl_settings``), changed only by the scenario's
``trainer_config``. Groups: the prompts ``DataProto`` holds one row per prompt (the workload's
rows are each prompt repeated ``generations_per_prompt`` times, consecutively), with a ``uid``
each, repeated ``rollout.n`` times interleaved as ``RayPPOTrainer.fit`` repeats it, so the recipe
builds the group's rows itself and verl's GRPO groups them by ``uid``. The server patch
wraps vLLM 0.17 internals and is not applied: the embedded model server's own splice
(``stack.policy.splice_prefix``) stands for it, and ``splice_prefix: false`` is the recipe
without it.

Past generation, in train mode, ``verl_train_batch`` runs ``RayPPOTrainer.fit``'s own lines
from the prompts to ``update_actor``: the ``uid`` and ``_get_gen_batch`` before generation, the
manager's output ``union``ed into the step's batch, the response mask, ``extract_reward``,
``token_level_rewards``, the rollout-correction mask and ``compute_advantage`` (GRPO, as the
recipe's scripts run it) after; its ``STOOD_IN`` (the data-parallel balancing, the actor's
``old_log_probs``, the step's metrics, the row status) is recorded with the call. What verl
raises there is what ``collect`` raises. Validation mode reads the manager's output itself, as
verl's ``_validate`` does.

Mapping: one Rollout per row of that batch, read from the tensors verl trains on. Each run of
``response_mask`` ones is a turn (generation ids and ``rollout_log_probs``), its prompt the
row's prompt plus every response token before it; the reward is the row's
``token_level_rewards`` (``rm_scores`` in validation); in train mode every row is
``in_train_batch``. The status comes from verl's own per-row signals only (``verl_status``): no
response token is aborted, the recipe's ``hit_max`` truncated, anything else completed. So under
verl's defaults (``max_model_len: null``) a row cut at the token limit is trained, and read, as a
complete one, and a substituted dummy stays a completed rollout whose one turn the model never
generated, for ``turns_generated`` to see.
Under transformers 5 (verl 0.9.1 requires it) the dummy is never built: ``_empty_result``
slices the ``BatchEncoding`` that ``apply_chat_template`` now returns as if it were token ids
and raises ``TypeError``, so one unreadable row fails the whole batch; that is upstream's
behaviour and is passed on as it is.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.collector import readiness
from pytest_rollout_chaos.collector.adapters import own_gym, verl_prompts, verl_recipe, verl_status
from pytest_rollout_chaos.collector.adapters import verl_train_batch as train_batch
from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings, nested
from pytest_rollout_chaos.collector.adapters.upstream import Upstream
from pytest_rollout_chaos.collector.adapters.verl_settings import n_key, settings
from pytest_rollout_chaos.collector.failures import root_cause
from pytest_rollout_chaos.collector.groups import group_size
from pytest_rollout_chaos.collector.protocol import (
    CollectorContext,
    GymRunner,
    Mode,
    Rollout,
    Row,
    Turn,
    row_index,
)

RAY_STATE_WARNING: Final = "Ray state API is no longer experimental"
"""verl imports ``ray.experimental.state`` at module level; Ray 2.60 warns about it on import."""


@dataclass(frozen=True, slots=True)
class _VerlUpstream(Upstream):
    """``Upstream`` whose import check lets verl's one known import-time warning pass, so a run
    that turns warnings into errors still tells a missing trainer from a working one."""

    def require(self) -> None:
        verl_recipe.mount()  # a recipe checkout first on sys.path becomes ``recipe``, as in verl's tree
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=RAY_STATE_WARNING, category=DeprecationWarning)
            Upstream.require(self)

    def origin(self) -> str:
        return str(verl_recipe.root() or Upstream.origin(self))


GYM_CLIENT: Final = (
    "stand-in: the harness's GymClient (ctx.gym) in the recipe's RolloutCollectionHelper call; "
    "NeMo Gym's own nemo_gym.rollout_collection.RolloutCollectionHelper is not run"
)
"""What plays NeMo Gym's client where ``nemo_gym`` does not import (``gym_client`` says which ran)."""


def gym_client(nemo_gym: str | None) -> str:
    """What plays NeMo Gym's client where NeMo Gym ``nemo_gym`` is installed (None: none is):
    NeMo Gym's own where it imports, else ``GYM_CLIENT`` (``adapters.gym_client`` asks)."""
    if not nemo_gym:
        return GYM_CLIENT
    return (
        f"NeMo Gym's own (nemo-gym {nemo_gym}): nemo_gym.rollout_collection.RolloutCollectionHelper and "
        "BaseServerConfig of the stack's head server, as _init_nemo_gym builds them; stands in only for "
        "RunHelper.start (the stack's servers run already)"
    )


UPSTREAM = _VerlUpstream(
    adapter="verl",
    modules=(verl_recipe.MODULE,),
    install=(
        "pip install torch==2.13.0 transformers==5.5.4 ray==2.60.0 verl==0.9.1 cachetools fastapi "
        "uvicorn, with --rollout-chaos-upstream=<a verl-recipe checkout> (the recipe is not a package)"
    ),
)

RECIPE_MODULE: Final = verl_recipe.MODULE
MANAGER_CLASSES: Final = ("NemoGymAgentLoopManager", "NeMoGymAgentLoopManager")
"""PR #80's name, then #87's (a rename; the collection code is the same)."""
SOURCE: Final = "collector"
GENERATION_STOOD_IN: Final = (
    "the manager's create and __init__ (Ray workers, vLLM replicas, NeMo Gym's RunHelper): the "
    "manager is made with object.__new__ and given the attributes _init_nemo_gym sets",
    "generate_sequences' hop onto the manager's loop thread: _async_generate_sequences is awaited "
    "in the collector's own loop",
    "the recipe's vLLM server patch: the policy server's own splice (splice_prefix) stands for it",
)
"""What of the recipe's generation is stood in (the module's docstring says why)."""
READ_OUT: Final = "the batch RayPPOTrainer.fit hands update_actor"
"""Where the Rollouts of a train step are read from (``upstream_calls``)."""
VALIDATION_READ_OUT: Final = "the manager's output DataProto, as _validate reads it"
"""Where the Rollouts of a validation are read from."""


class VerlCollector:
    """The recipe's manager behind the collector protocol; gym style only (NeMo Gym runs the loop)."""

    styles = ("gym",)
    numbers_rows = (
        "the recipe stamps each row it sends NeMo Gym with its position in the batch "
        '(nemo_gym/agent_loop.py, "_rowidx": i)'
    )
    own_concurrency = "the recipe hands NeMo Gym's run_examples every row of the batch at once"

    def __init__(self, ctx: CollectorContext) -> None:
        if ctx.model_dir is None:
            raise ValueError(
                "the verl adapter loads the tokenizer as the recipe does, from the policy's model "
                "directory, and the context has none (ctx.model_dir is None)"
            )
        self.ctx = ctx
        settings(ctx)  # a trainer_config key the adapter does not hand verl: said before anything starts
        UPSTREAM.require()  # imports the recipe letting verl's known import warning pass
        self.recipe: Any = importlib.import_module(RECIPE_MODULE)
        # verl's trainer module imports its engines, torch.jit code and the like, which warn at import
        # (an engine not installed, deprecations): import-time notices, not the run's outcome.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module(train_batch.TRAINER_MODULE)
        self.tokenizer = tokenizer_for(ctx.model_dir)
        self.servers_ready = False
        # NeMo Gym's own client where it imports and there is a head server for it to ask (a context
        # over a canned Gym client names none): its version, else None for the stand-in.
        self.own_gym = own_gym.version() if ctx.head_url is not None else None
        if self.own_gym is not None:
            own_gym.preload()

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        history = self.ctx.history
        history.append(SOURCE, "invoke", "collect", {"rows": len(rows), "mode": mode, "style": "gym"})
        try:
            rollouts = await self._collect(rows, mode)
        except BaseException as error:
            history.append(SOURCE, "fail", "collect", {"error": root_cause(error)})
            raise
        finally:
            if self.own_gym is not None:  # the trainer's process would end here: so does its client
                await own_gym.end_process_client()
        history.append(SOURCE, "ok", "collect", {"returned": len(rollouts)})
        return rollouts

    async def _collect(self, rows: Sequence[Row], mode: Mode) -> list[Rollout]:
        history = self.ctx.history
        if not self.servers_ready:  # what ``create`` does once: its vLLM servers are up before any step
            await readiness.wait_for_policy(self.ctx, history)
            self.servers_ready = True
        validate = mode == "validation"
        size = group_size(rows, setting=f"actor_rollout_ref.rollout.{n_key(validate)}")
        taken = settings(self.ctx, validate=validate, n=size)
        taken.record(self.ctx.history, mode=mode)
        manager = self.manager(taken)
        prompts = verl_prompts.prompts_proto(self.recipe, rows[::size], self.tokenizer, validate=validate)
        step = None
        if validate:  # _validate: a uid per prompt, each repeated val_kwargs.n times
            prompts = verl_prompts.validation_groups(prompts, n=size)
        else:  # fit: the uid, _get_gen_batch, each prompt repeated rollout.n times
            step = train_batch.before_generation(prompts, n=size, global_steps=0)
            prompts = step.gen_batch
        generation = f"{type(manager).__module__}.{type(manager).__qualname__}._async_generate_sequences"
        call = {"rows": len(rows), "validate": mode == "validation", "call": generation}
        stood_in = [*GENERATION_STOOD_IN, *([GYM_CLIENT] if self.own_gym is None else [])]
        read_out = {"read_out": VALIDATION_READ_OUT} if validate else {}
        history.append(SOURCE, "invoke", "generate_sequences", {**call, "stood_in": stood_in, **read_out})
        try:
            with verl_status.watching(self.recipe) as watched:
                output = await manager._async_generate_sequences(prompts)
        except BaseException as error:
            history.append(SOURCE, "fail", "generate_sequences", {**call, "error": root_cause(error)})
            raise
        history.append(SOURCE, "ok", "generate_sequences", {**call, "returned": len(output)})
        batch = output if step is None else self.train_batch(step, output, taken)
        trained = batch is not output  # the rows of a train batch fit made, not the manager's output
        rollouts = []
        status = verl_status.statuses(batch, watched.hit_max())
        for position, row in enumerate(rows):
            rollout, declared_turns = rollout_from_row(batch, position, row_index(row, position))
            state, why = status[position]
            rollout = replace(rollout, status=state, error=why, in_train_batch=True if trained else None)
            if declared_turns != len(rollout.turns):
                history.append(
                    SOURCE,
                    "info",
                    "verl_turn_count",
                    {"row": rollout.row_index, "num_turns": declared_turns, "mask_runs": len(rollout.turns)},
                )
            history.append(
                SOURCE,
                "info",
                "rollout",
                {"row": rollout.row_index, "status": rollout.status, "turns": len(rollout.turns)},
            )
            rollouts.append(rollout)
        return rollouts

    def train_batch(self, step: train_batch.Step, output: Any, taken: TrainerSettings) -> Any:
        """``RayPPOTrainer.fit`` from the generation output to the batch ``_update_actor`` gets;
        what verl raises on the way is raised, unchanged."""
        history = self.ctx.history
        call = {"call": f"{train_batch.TRAINER_MODULE}.RayPPOTrainer.fit, generation to update_actor"}
        stood_in = [
            *([GYM_CLIENT] if self.own_gym is None else []),
            *train_batch.STOOD_IN,
            *verl_status.STOOD_IN,
        ]
        history.append(SOURCE, "invoke", "upstream", {**call, "stood_in": stood_in, "read_out": READ_OUT})
        try:
            batch = train_batch.train_batch(step, output, nested(taken.items, "algorithm"), n=_n(taken))
        except BaseException as error:
            history.append(SOURCE, "fail", "upstream", {**call, "error": root_cause(error)})
            raise
        history.append(SOURCE, "ok", "upstream", {**call, "samples": len(batch)})
        return batch

    def manager(self, taken: TrainerSettings | None = None) -> Any:
        """The recipe's manager with what ``_init_nemo_gym`` would have set, and nothing started."""
        taken = settings(self.ctx) if taken is None else taken
        omegaconf: Any = importlib.import_module("omegaconf")
        manager = object.__new__(verl_prompts.recipe_class(self.recipe, MANAGER_CLASSES))
        manager.rollout_config = omegaconf.OmegaConf.create(nested(taken.items, "actor_rollout_ref.rollout"))
        if self.own_gym is None:
            manager._rch = RolloutCollectionHelper(self.ctx.gym)
            manager._head_server_config = None  # ctx.gym found its head server itself
        else:
            rch, manager._head_server_config = own_gym.own_client(self.ctx.head_url, adapter="verl")
            manager._rch = own_gym.OwnGym(rch, own_gym.GymFaults(self.ctx.gym))
        self.ctx.history.append(SOURCE, "info", "gym_client", self._gym_client_facts())
        manager._tokenizer = self.tokenizer
        manager.distillation_enabled = False
        manager.reward_loop_worker_handles = None  # no reward workers: rewards come from NeMo Gym
        return manager

    def _gym_client_facts(self) -> dict[str, Any]:
        """What plays NeMo Gym's client in this collection, for the History."""
        if self.own_gym is None:
            return {"call": "RolloutCollectionHelper", "client": "stand-in over ctx.gym"}
        return {
            "call": "nemo_gym.rollout_collection.RolloutCollectionHelper()",
            "client": "NeMo Gym's own",
            "nemo_gym": self.own_gym,
            "head_server_config": self.ctx.head_url,
        }


factory = VerlCollector
"""``--rollout-chaos-target=verl``; the class is its own factory, so its ``styles`` skip early."""


def _n(taken: TrainerSettings) -> int:
    return int(next(item.value for item in taken.items if item.key == "actor_rollout_ref.rollout.n"))


class RolloutCollectionHelper:
    """NeMo Gym's ``RolloutCollectionHelper`` call shape (``examples=``, ``head_server_config=``) over
    ``ctx.gym``, which already is that contract; the awaitables pass through untouched."""

    def __init__(self, gym: GymRunner) -> None:
        self.gym = gym

    def run_examples(
        self, examples: Sequence[Row], head_server_config: object = None
    ) -> Iterator[Awaitable[tuple[dict[str, Any], dict[str, Any]]]]:
        return self.gym.run_examples(examples)


@functools.lru_cache(maxsize=4)
def tokenizer_for(model_dir: Path) -> Any:
    """The tokenizer the recipe's manager uses: ``omega_conf_to_dataclass(model_config).tokenizer``."""
    omegaconf: Any = importlib.import_module("omegaconf")
    config: Any = importlib.import_module("verl.utils.config")
    model_config = omegaconf.OmegaConf.create(
        {"_target_": "verl.workers.config.HFModelConfig", "path": str(model_dir)}
    )
    return config.omega_conf_to_dataclass(model_config).tokenizer


def rollout_from_row(output: Any, position: int, index: int) -> tuple[Rollout, int]:
    """Row ``position`` of the output ``DataProto`` as a Rollout, and the turn count verl declared.

    Padding is told apart by ``attention_mask`` (pad ids may be real token ids), never by value.
    """
    batch = output.batch
    prompt_width = int(batch["prompts"].shape[1])
    attention = batch["attention_mask"][position].bool()
    prompt = [int(token) for token in batch["prompts"][position][attention[:prompt_width]].tolist()]
    kept = attention[prompt_width:]
    response = [int(token) for token in batch["responses"][position][kept].tolist()]
    trained = [int(flag) for flag in batch["response_mask"][position][kept].tolist()]
    keys = set(batch.keys())
    if "rollout_log_probs" not in keys:  # the recipe asks vLLM for them; nothing here makes them up
        raise KeyError(
            f"the batch verl hands on has no rollout_log_probs (keys: {', '.join(sorted(keys))}): "
            "the recipe's agent loop records the logprobs vLLM reported, and none came back"
        )
    logprobs = [float(value) for value in batch["rollout_log_probs"][position][kept].tolist()]
    scores = "token_level_rewards" if "token_level_rewards" in keys else "rm_scores"
    if scores not in keys:
        raise KeyError(
            f"the batch verl hands on has no {scores} (keys: {', '.join(sorted(keys))}): the recipe "
            "puts NeMo Gym's reward there; verl's own reward manager, which would fill it, is not run here"
        )
    reward = float(batch[scores][position].sum())
    turns = [
        Turn(prompt + response[:start], response[start:end], logprobs[start:end])
        for start, end in mask_runs(trained)
    ]
    declared = int(output.non_tensor_batch["__num_turns__"][position])
    # completed until verl_status reads the row's status from verl's own signals
    return Rollout(row_index=index, status="completed", reward=reward, turns=turns), declared


def mask_runs(mask: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of ones: the assistant generations inside a verl response."""
    runs = []
    start: int | None = None
    for position, flag in enumerate([*mask, 0]):
        if flag and start is None:
            start = position
        elif not flag and start is not None:
            runs.append((start, position))
            start = None
    return runs
