"""The ``skyrl`` adapter: SkyRL's real ``SkyRLGymGenerator`` collects the rows through our stack.

What runs is SkyRL's own code (NovaSky-AI/SkyRL, from the tree ``--rollout-chaos-upstream`` puts
first, its ``skyrl-gym/`` folder beside it): ``prepare_generator_input`` and
``get_sampling_params_for_backend`` build the batch as ``RayPPOTrainer.train`` does,
``SkyRLGymGenerator.generate`` fans it out (``tqdm.gather`` over one ``agent_loop`` per row),
and each ``agent_loop`` is SkyRL's multi-turn loop: ``skyrl_gym.make`` builds the row's
environment, the tokenizer's chat template renders the prompt and every observation, the model
is called token in, token out through SkyRL's HTTP ``RemoteInferenceClient`` (its
``/inference/v1/generate`` route, its retries), and loss masks, logprobs and token-level rewards
are SkyRL's bookkeeping. The tokenizer is loaded with SkyRL's ``get_tokenizer`` from the policy's
model directory. Past the generator, ``skyrl_train_batch`` runs ``RayPPOTrainer``'s step to the
batch its policy update receives (advantages as its config says); the rollouts are read back from
the generator's output (``skyrl_output``), each marked in the train batch with the loss mask that
batch holds for it and SkyRL's loss reduction. What SkyRL raises, the collector raises, unchanged.

**Stood in** (``STOOD_IN``, recorded with each call). The trainer's dataloader: the adapter
builds SkyRL's prompts from the rows (``prompt``, ``env_class``, ``env_extras``, ``uid``). The
client is built as SkyRL's ``build_new_inference_client`` builds it for an external proxy
(``generator.inference_engine.external_proxy_url``: the same URL for data and control plane),
pointed at the policy through the ``collector->policy`` link, so the fault layer sits in front
of every model call; that function itself is not called, because its module imports
``vllm_router`` at the top. The rows' environment is ``skyrl_env`` (a
``skyrl_gym`` environment registered with ``skyrl_gym.register``): SkyRL has no NeMo Gym
environment, so it seeds a session, runs tool calls and verifies on the stack's resources server
through the ``collector->resources`` link. A row's tools become a system message of its prompt,
in the words the policy's chat template gives them (SkyRL's generator templates the messages
alone; a SkyRL dataset describes its tools in its prompts). One generator hook, for groups
(``skyrl_prompts``).

**Settings** (``skyrl_settings``). Upstream's defaults (``SkyRLTrainConfig()``), except what the
scenario's run sets for every collector: the turn limit, the generation length, the temperature,
the stop strings a scenario asks for (``stack.policy.stop``: set in SkyRL's own sampling
parameters, where the Gym model server would set them for an agent) and the workload's group size.
``generator.skip_failed_rollouts`` (SkyRL PR #1986) stays at its default, off;
``--rollout-chaos-target=skyrl_skip_failed_rollouts`` turns it on, and on a tree without the
setting that target is a usage error, as SkyRL's structured config rejects an unknown key.

What the two pinned trees show: before PR #1986, and after it with the flag off, the first
raising rollout (the verifier's HTTP 500 in ``verifier-exception-isolated``, a policy 503 in
``policy-503-storm``: ``RemoteInferenceClient`` retries dropped connections, not error statuses)
takes the whole step down while its siblings run on detached (``isolated_failures``); with the
flag on the failed rows come back as placeholders, and a batch whose every rollout failed raises
(``RuntimeError`` from the first failure), so no batch of placeholders is handed on. The
placeholders it keeps are in the train batch, reward 0 and loss mask ``[0]``: inert at one
generation per prompt under SkyRL's ``token_mean``, not in a group (``train_batch_sound``).

**Faults on the parts SkyRL replaces** (``skyrl_retargets``: which move where, which do not and
why). SkyRL's loop has no NeMo Gym agent and no model server: it runs each trajectory itself. A
catalog fault aimed at them acts on the request of SkyRL's loop doing the same job, or skips by
reach, saying so; a trigger on the model server's nth request counts the policy's. Its client is
given one policy address, so of several replicas it reaches the first only.

**Validation** (``skyrl_validation``): SkyRL's own ``RayPPOTrainer.eval`` (``evaluate``) over one
eval batch of the same prompts, through the same generator, environment and client, with the
eval fields of the config set as the training ones are; the rollouts are read from the
``GeneratorOutput`` its generator hands ``evaluate``, and nothing is trained. Native-style
validation skips: what it judges is the environment's batched steps, and SkyRL steps each
trajectory's environment on its own.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, ClassVar, Final

from pytest_rollout_chaos.collector.abilities import Retarget, Retrigger
from pytest_rollout_chaos.collector.adapters import skyrl_env
from pytest_rollout_chaos.collector.adapters import skyrl_train_batch as train_batch
from pytest_rollout_chaos.collector.adapters import skyrl_validation as validation
from pytest_rollout_chaos.collector.adapters.skyrl_output import LoggedFailures, rollout_of
from pytest_rollout_chaos.collector.adapters.skyrl_prompts import (
    HOOK,
    generation_limit,
    generator_class,
    prompts_of,
)
from pytest_rollout_chaos.collector.adapters.skyrl_retargets import RETARGETS, RETRIGGERS, UNMOVED
from pytest_rollout_chaos.collector.adapters.skyrl_settings import (
    GROUP_SIZE,
    KNOWN,
    SKIP_FAILED,
    STOP,
    settings,
)
from pytest_rollout_chaos.collector.adapters.skyrl_upstream import (
    CLIENT_MODULE,
    CONFIG_MODULE,
    ENGINE_UTILS_MODULE,
    GENERATOR_MODULE,
    GENERATOR_UTILS_MODULE,
    SERVER_UTILS_MODULE,
    UPSTREAM,
    UPSTREAM_SKIP_FAILED,
)
from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings
from pytest_rollout_chaos.collector.failures import root_cause
from pytest_rollout_chaos.collector.groups import group_size
from pytest_rollout_chaos.collector.protocol import (
    CollectorContext,
    Mode,
    Rollout,
    Row,
    Style,
    row_index,
)
from pytest_rollout_chaos.servers.gym.stack import MAX_OUTPUT_TOKENS

GROUPS_UNSUPPORTED: Final = (
    f"this SkyRL tree's SkyRLGymGenerator has no {HOOK} hook, through which each of SkyRL's "
    "copies of a prompt gets its own row of the group (its TrajectoryID's repetition_id) to seed "
    "its environment's session; one row per prompt only on this tree"
)
_LOOP_STOOD_IN: Final = (
    "the trainer's dataloader: one SkyRL prompt per group of rows (prompt, env_class, env_extras, "
    "uid), built by the adapter; a row's tools a system message in the chat template's words",
    "build_new_inference_client: the RemoteInferenceClient built as it builds it for an external "
    "proxy (its module imports vllm_router)",
    "the environment: skyrl_env's NeMo Gym row over the stack's resources server (SkyRL has no "
    "NeMo Gym environment), recording each request it sends, as NeMo Gym's client records each /run",
    f"SkyRLGymGenerator.{HOOK} (a no-op upstream, for subclasses): each sample's extras get row "
    "repetition_id of its prompt's group and agent_loop's session id",
)
STOOD_IN: Final = (*_LOOP_STOOD_IN, *train_batch.STOOD_IN)
"""What of the trainer's path to the policy update is stood in; every other line is SkyRL's."""
STOOD_IN_VALIDATION: Final = (*_LOOP_STOOD_IN, train_batch.INIT_STOOD_IN, *validation.STOOD_IN)
"""What of ``RayPPOTrainer.eval``'s path is stood in (``skyrl_validation``): the same prompts,
client, environment and hook, the trainer built without ``__init__``, and its eval's own."""
NO_BATCHED_STEP: Final = (
    "native-style validation is judged by the environment's batched steps (NeMo Gym's /step_batch, "
    "one per task group per turn: batched_env_eval); SkyRL's agent_loop steps each trajectory's own "
    "environment (env.step in skyrl_gym_generator.py), so no batched step of its exists to judge"
)
SOURCE: Final = "collector"
CALL: Final = f"{train_batch.TRAINER_MODULE}.RayPPOTrainer.train, generate to the policy's forward_backward"
"""The span of SkyRL's code one collection runs (``upstream_calls``)."""
READ_OUT: Final = (
    "the GeneratorOutput RayPPOTrainer.generate returns (before postprocess_generator_output "
    "rewrites it), each row marked by the mini-batches forward_backward is handed"
)
"""Where the Rollouts are read from (``upstream_calls``)."""


GYM_CLIENT: Final = (
    "not used: SkyRL's loop calls the policy and the resources server itself (no NeMo Gym client)"
)
"""What plays NeMo Gym's client here (``rollout-chaos gate`` reports it per side)."""


class SkyRLCollector:
    """SkyRL's generator over the stack (module docstring: what is real, the settings;
    ``skyrl_output``: the mapping)."""

    modes = ("train", "validation")
    cannot_combine: ClassVar[Mapping[tuple[Style, Mode], str]] = {("native", "validation"): NO_BATCHED_STEP}
    reaches: ClassVar[Mapping[str, tuple[str, ...] | None]] = {
        "policy": ("/inference/v1/generate",),
        "policy[0]": ("/inference/v1/generate",),  # the one replica collector->policy goes to
        "collector->policy": None,
        "resources": ("/seed_session", "/calculator", "/verify"),
        "collector->resources": None,
        "collector": None,
    }
    retargets: ClassVar[tuple[Retarget, ...]] = RETARGETS
    retriggers: ClassVar[tuple[Retrigger, ...]] = RETRIGGERS
    unmoved: ClassVar[Mapping[str, str]] = UNMOVED
    skip_failed_rollouts = False
    max_group_size: int | None = None  # one row per prompt on a tree without the hook (__init__)
    max_group_size_why: ClassVar[str] = GROUPS_UNSUPPORTED
    own_concurrency: ClassVar[str] = "SkyRLGymGenerator.generate starts every row's agent_loop at once"
    sets_stop: ClassVar[str] = (
        f"SkyRL's {STOP}, which its generator sends with every generate (include_stop_str_in_output)"
    )

    def __init__(self, ctx: CollectorContext) -> None:
        if ctx.model_dir is None or ctx.resources_url is None:
            raise ValueError(
                "the skyrl adapter loads the tokenizer from the policy's model directory and steps its "
                "environment on the resources server; the context lacks "
                + " and ".join(
                    name
                    for name, value in (("model_dir", ctx.model_dir), ("resources_url", ctx.resources_url))
                    if value is None
                )
            )
        (UPSTREAM_SKIP_FAILED if self.skip_failed_rollouts else UPSTREAM).require()
        TrainerSettings("skyrl", ctx.settings.trainer_config, KNOWN).check()
        self.ctx = ctx
        self.model_dir = ctx.model_dir
        self.resources_url = ctx.resources_url
        self.recorder = skyrl_env.recorder(ctx.history)
        tok: Any = importlib.import_module("skyrl.utils.tok")
        self.tokenizer = tok.get_tokenizer(str(ctx.model_dir), trust_remote_code=True, use_fast=True)
        skyrl_env.env_class()
        generator_module: Any = importlib.import_module(GENERATOR_MODULE)
        if not hasattr(generator_module.SkyRLGymGenerator, HOOK):
            self.max_group_size = 1  # the fit step skips larger groups, saying why

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        if mode != "validation":
            return await self._collect(rows, mode, None)
        with tempfile.TemporaryDirectory(prefix="skyrl-exports-") as folder:
            return await self._collect(rows, mode, folder)

    async def _collect(self, rows: Sequence[Row], mode: Mode, eval_folder: str | None) -> list[Rollout]:
        """One training step's generation and update (``eval_folder`` None), or one evaluation
        (``skyrl_validation``) dumping its results under ``eval_folder``."""
        size = group_size(rows, setting=GROUP_SIZE)
        generator_module: Any = importlib.import_module(GENERATOR_MODULE)
        history = self.ctx.history
        validating = eval_folder is not None
        call = {
            "rows": len(rows),
            "mode": mode,
            SKIP_FAILED: self.skip_failed_rollouts,
            "stood_in": list(STOOD_IN_VALIDATION if validating else STOOD_IN),
            "call": validation.CALL if validating else CALL,
            "read_out": validation.READ_OUT if validating else READ_OUT,
        }
        history.append(SOURCE, "invoke", "generate", call)
        config = self.config(
            n_samples_per_prompt=size,
            max_generate_length=generation_limit(rows),
            prompts=len(rows) // size,
            mode=mode,
            eval_folder=eval_folder,
        )
        client = self.client(config)
        generator = generator_class(generator_module.SkyRLGymGenerator)(
            generator_cfg=config.generator,
            skyrl_gym_cfg=config.environment.skyrl_gym,
            inference_engine_client=client,
            tokenizer=self.tokenizer,
            policy_model_name=importlib.import_module(SERVER_UTILS_MODULE).resolve_policy_model_name(config),
        )
        trainer = train_batch.trainer(config, self.tokenizer, generator)
        failures = LoggedFailures()
        trained: list[Any] = []
        try:
            async with closing(client, generator):
                with failures.listening():
                    if validating:
                        output = await validation.evaluate(trainer, self.prompts(rows, size))
                    else:
                        batch, uids = self.generator_input(rows, config, size)
                        output = await self.generate(trainer, batch)
                    # read before the step: postprocess_generator_output rewrites the output in place
                    rollouts = [
                        rollout_of(output, position, row_index(row, position), failures)
                        for position, row in enumerate(rows)
                    ]
                    if not validating:
                        trained = train_batch.train_step(trainer, output, uids)
        except BaseException as error:
            history.append(SOURCE, "fail", "generate", {**call, "error": root_cause(error)})
            raise
        history.append(SOURCE, "ok", "generate", {**call, "returned": len(rollouts)})
        return rollouts if validating else train_batch.marked(rollouts, trained, config)

    async def generate(self, trainer: Any, batch: Any) -> Any:
        """What the trainer's step does with the batch: ``RayPPOTrainer.generate`` (the generator's
        ``generate``, then ``validate_generator_output``)."""
        return await trainer.generate(batch)

    def config(
        self,
        *,
        n_samples_per_prompt: int = 1,
        max_generate_length: int = MAX_OUTPUT_TOKENS,
        prompts: int = 1,
        mode: Mode = "train",
        eval_folder: str | None = None,
    ) -> Any:
        """``SkyRLTrainConfig()`` (SkyRL's defaults) with what ``settings`` gives it."""
        config: Any = importlib.import_module(CONFIG_MODULE).SkyRLTrainConfig()
        taken = settings(
            self.ctx,
            policy_root=self.policy_root,
            model_dir=str(self.model_dir),
            n_samples_per_prompt=n_samples_per_prompt,
            max_generate_length=max_generate_length,
            prompts=prompts,
            mini_batch_default=config.trainer.policy_mini_batch_size,
            eval_folder=eval_folder,
        )
        if self.skip_failed_rollouts:
            taken.variant(f"generator.{SKIP_FAILED}", True, "the skyrl_skip_failed_rollouts target")
        for item in taken.items:
            *parents, leaf = item.key.split(".")
            place = config
            for part in parents:
                place = getattr(place, part)
            setattr(place, leaf, item.value)
        taken.record(self.ctx.history, mode=mode)
        return config

    @property
    def policy_root(self) -> str:
        return self.ctx.policy.rstrip("/").removesuffix("/v1")

    def client(self, config: Any) -> Any:
        """``RemoteInferenceClient`` as ``build_new_inference_client`` makes it for an external proxy."""
        module: Any = importlib.import_module(CLIENT_MODULE)
        server_utils: Any = importlib.import_module(SERVER_UTILS_MODULE)
        engine = config.generator.inference_engine
        return module.RemoteInferenceClient(
            proxy_url=engine.external_proxy_url,
            server_urls=[engine.external_proxy_url],
            model_name=engine.served_model_name,
            enable_return_routed_experts=engine.enable_return_routed_experts,
            uses_lora_weight_sync=server_utils._uses_lora_weight_sync(config),
            data_parallel_size=engine.data_parallel_size,
            tokenizer=self.tokenizer,
        )

    def prompts(self, rows: Sequence[Row], size: int = 1) -> list[dict[str, Any]]:
        """One SkyRL prompt per group of ``size`` rows (``skyrl_prompts``), as a batch of the
        trainer's dataloader holds them, their extras naming this stack's environment."""
        extras: dict[str, Any] = {
            skyrl_env.RESOURCES_URL: self.resources_url,
            skyrl_env.TIMEOUT_S: self.ctx.settings.request_timeout_s,
            skyrl_env.EOS_TEXT: self.tokenizer.eos_token,
            skyrl_env.RECORDER: self.recorder,
        }
        return prompts_of(rows, size, extras, self.tokenizer)

    def generator_input(self, rows: Sequence[Row], config: Any, size: int = 1) -> tuple[Any, list[str]]:
        """``prepare_generator_input`` over one SkyRL prompt per group of ``size`` rows
        (``skyrl_prompts``: groups), as the trainer's step builds it: the batch and its ``uids``."""
        utils: Any = importlib.import_module(GENERATOR_UTILS_MODULE)
        engine_utils: Any = importlib.import_module(ENGINE_UTILS_MODULE)
        sampling = engine_utils.get_sampling_params_for_backend(
            config.generator.inference_engine.backend, config.generator.sampling_params
        )
        batch, uids = utils.prepare_generator_input(
            self.prompts(rows, size),
            config.generator.n_samples_per_prompt,
            sampling,
            config.environment.env_class,
            "train",
            0,
        )
        return batch, list(uids)


@contextlib.asynccontextmanager
async def closing(client: Any, generator: Any) -> AsyncIterator[None]:
    """The inference client's HTTP session and the environment threads, closed on every path, as
    the trainer's shutdown closes them; what the step raised goes on unchanged.

    A step that raised leaves its siblings running (``tqdm.gather``), and the first of them to ask
    the policy again opens a new session (``RemoteInferenceClient._get_session``). Nothing of them
    is stopped here (``quiet_after_end`` judges them): the client is closed once more when the
    event loop shuts its async generators down, after its runner has cancelled what was left, so
    no session's sockets outlive the scenario and surface in the next one's teardown."""
    try:
        yield
    finally:
        await client.teardown()
        if generator.env_executor is not None:
            generator.env_executor.shutdown(wait=False)
        late = _closed_with_the_loop(client)
        await anext(late)  # its first step registers it with the running loop (shutdown_asyncgens)
        _LEFT_RUNNING[id(client)] = late


_LEFT_RUNNING: Final[dict[int, AsyncIterator[None]]] = {}


async def _closed_with_the_loop(client: Any) -> AsyncIterator[None]:
    """Waits, suspended, until the loop closes it (``shutdown_asyncgens``); then closes ``client``."""
    try:
        yield
    finally:
        _LEFT_RUNNING.pop(id(client), None)
        await client.teardown()


class SkipFailedRolloutsCollector(SkyRLCollector):
    """The same with ``generator.skip_failed_rollouts`` on (PR #1986's flag)."""

    skip_failed_rollouts = True


factory = SkyRLCollector
"""``--rollout-chaos-target=skyrl``; the class is its own factory, so its ``modes`` and ``reaches``
skip early."""
