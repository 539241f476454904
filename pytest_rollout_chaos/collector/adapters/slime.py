"""The ``slime`` adapter: slime's real ``generate_and_rm_group`` collects the rows through our stack,
and slime's real ``RolloutManager`` turns them into the train data the rows are read from.

What runs is slime's own code (THUDM/slime, from the installed package or the tree that
``--rollout-chaos-upstream`` puts first): ``GenerateState`` (the real singleton, cleared before and
after every collection, so its semaphore belongs to the collection's event loop),
``GenerateState.submit_generate_tasks``, which starts one ``generate_and_rm_group`` task per
prompt group, ``generate_and_rm`` with its semaphore and custom-generate branch,
``slime.agent.trajectory`` to turn a trajectory into a training sample, and past generation
``RolloutManager.generate`` (``slime/ray/rollout.py``): ``_get_rollout_data`` (the rollout-id
check and the flattening of the groups), ``_log_rollout_data`` (``compute_metrics_from_samples``,
``compute_perf_metrics_from_samples``) and ``_convert_samples_to_train_data`` (reward
normalization, loss masks). The adapter's own code is the step loop around the group tasks, the
generate hook, the stand-ins below, and the reading of the train data.

**Past generation: ``RolloutManager.generate``, three things stood in** (``STOOD_IN``, recorded in
the History with each call, so the report's timeline lists them). The manager is built with
``RolloutManager.__new__`` as slime's CPU tests build one, without ``__init__`` (no Ray actor,
SGLang servers, router, data source or tracking), holding the attributes ``generate`` reads. Its
rollout function hands ``generate`` the groups the step loop collected, sorted by their first
sample's index as ``generate_rollout_async`` sorts them, with slime's ``MetricGatherer``'s
metrics. ``_split_train_data_by_dp`` (Ray's object store, the DP schedule) hands the train data
back as it is. The arguments this reads are taken with the others (``settings``): slime's parser
defaults (GRPO, rewards normalized per group; std normalization off for one sample per prompt,
as ``slime_validate_args`` sets it); ``rollout_batch_size`` is the number of groups. Whatever slime
raises on this path is what ``collect`` raises.

**Generation: slime's custom-generate hook, not SGLang's ``/generate``.**
``args.custom_generate_function_path`` names ``generate_with_gym`` here; slime loads it by path
(``load_function``) and awaits it inside ``generate_and_rm``, as it does for its own agent examples
(``examples/coding_agent_rl``, ``search-r1``, ``retool``). It runs the sample's NeMo Gym row
through ``ctx.gym.run_examples([row])``: one ``/run`` on the agent, which owns the multi-turn loop,
the tools and ``/verify``. The other way, slime's default ``generate``, posts to an SGLang router's
``/generate``: our policy speaks OpenAI/vLLM, and that path is single-turn model calls with no
agent, so agent-level faults (the ``trajectory_exception`` fault is an HTTP 500 on one row's
``/run``) could not be expressed. Through the hook they reach slime the way an agent crash does: as
an exception out of generate. The hook catches nothing and has no deadline of its own (slime's
``generate_and_rm`` has none either); what slime does with an exception is what is under test.

The hook turns the ``/run`` result into slime's shape with slime's own helpers: each model call
(an output item carrying token ids) is a ``TurnRecord``, ``merge_turns`` stitches them into one
segment (model tokens loss-mask 1, tool and template tokens 0; on prefix drift it restarts or
truncates the segment and masks, as slime does), and ``write_segment_to_sample`` fills ``tokens``,
``response_length``, ``loss_mask`` and ``rollout_log_probs``. A result with no generation data, or
fewer results than the one row asked for, raises.

**Reward: the Gym result's.** The agent's ``/verify`` scored the trajectory; the hook puts that
reward on the sample, and ``generate_and_rm`` then skips ``async_rm`` ("custom generate paths may
have already filled the reward"), as in slime's coding-agent example. slime's ``rm_hub`` has no
NeMo Gym verifier to call instead.

**Groups.** slime generates ``n_samples_per_prompt`` samples per prompt as one group. The workload
lays rows out prompt by prompt, each repeated ``generations_per_prompt`` times with its own
``_rowidx``, so consecutive rows that are equal but for ``_rowidx`` form one group and
``n_samples_per_prompt`` is the group size (rows whose groups differ in size are a ValueError, as
slime has one ``n_samples_per_prompt``). With ``generations_per_prompt: 1`` every row is its own group.

**The step.** slime launches its SGLang engines and waits for their ``/health_generate`` before any
rollout (``sglang_engine._wait_server_healthy``, outside the code driven here); the adapter
likewise waits for the policy's readiness, within the context's ``policy_ready_timeout_s``, before
it starts. Then, as in ``generate_rollout_async``, the group tasks are awaited with
``asyncio.wait(FIRST_COMPLETED)`` and each finished one's ``task.result()`` is read, so a group
that raised ends the collection with that exception, unchanged: the whole rollout step down, what
the trainer sees. The other groups' tasks, and the raising group's siblings (``gather`` without
``return_exceptions`` cancels none), keep running detached; the invariants judge that.

**Reading the train data back** (one Rollout per row, in row order, each ``in_train_batch``):
the tokens, response length, loss mask and rollout logprobs are the train data's; the reward is
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

**Imports.** slime imports ``ray``, ``sglang_router`` and ``transformers`` at module level in paths
this does not use; exactly those three are stubbed, each only when it cannot be imported, as
slime's own CPU tests do (``tests/plugin_contracts/_shared.py::install_stubs``). ``slime.ray.rollout``
also imports three names from SGLang (memory-type tags, ``ServerArgs``, ``kill_process_tree``);
where SGLang is not installed those are stubbed too, the two callables refusing to run, and nothing
else. ``RolloutManager`` is a Ray actor class, so Ray itself must be installed; the class is read
from under the actor class ``@ray.remote`` made.
With the stub, ``AutoTokenizer.from_pretrained`` returns a bare object, so response text is
decoded with the context's tokenizer, never slime's. The checkpoint slime loads is the bundled
tiny model's directory; nothing reads its tokenizer on this path.

What the two pinned trees (main before PR #2078, and its head) show on the catalog: before, every
scenario in which one trajectory's ``/run`` raises takes the step down in ``generate_and_rm_group``
(``isolated_failures``); after, the step goes on and goes down in ``RolloutManager`` on the
placeholder list instead (the same verdict, with slime's ``AttributeError``), and a batch that
fails as a whole (every ``/run`` failing, a result the Gym client lost) becomes a train batch of
placeholders instead of an error (``train_batch_sound``, ``no_empty_epoch``). On both: no
deadline anywhere on this path (a frozen agent or a black-holed link hangs: ``bounded``),
non-finite logprobs pass through (``finite_logprobs``), and ``merge_turns`` drops or masks turns
on prefix drift while the sample stays COMPLETED (``turns_generated``).

Workloads: gym style, train mode (``eval_rollout`` does not go through ``generate_and_rm_group``);
other scenarios skip, saying so.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import re
import sys
import types
from argparse import Namespace
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.collector import readiness, results
from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings
from pytest_rollout_chaos.collector.adapters.upstream import Upstream
from pytest_rollout_chaos.collector.protocol import (
    Collector,
    CollectorContext,
    Mode,
    Rollout,
    RolloutStatus,
    Row,
    Turn,
    row_index,
)

ROLLOUT_MODULE: Final = "slime.rollout.sglang_rollout"
TRAJECTORY_MODULE: Final = "slime.agent.trajectory"
MANAGER_MODULE: Final = "slime.ray.rollout"
TYPES_MODULE: Final = "slime.rollout.base_types"
GENERATE_PATH: Final = f"{__name__}.generate_with_gym"
ROW_KEY: Final = "nemo_gym_row"
SOURCE: Final = "collector"
STUBBED: Final = ("ray", "sglang_router", "transformers", "sglang")
SGLANG_MODULES: Final = (
    "sglang",
    "sglang.srt",
    "sglang.srt.constants",
    "sglang.srt.server_args",
    "sglang.srt.utils",
)
STOOD_IN: Final = (
    "RolloutManager.__init__ (no Ray actor, no SGLang servers, router, data source or tracking: the "
    "instance gets the attributes generate() reads)",
    "the rollout function (slime's generate_rollout): hands generate() the groups the adapter's "
    "generate_rollout_async wait loop collected, sorted by their first sample's index as slime sorts "
    "them, with slime's MetricGatherer's metrics",
    "RolloutManager._split_train_data_by_dp (Ray's object store and the DP schedule): the train "
    "data is read where slime packs it for its training ranks",
)
"""What of slime's ``RolloutManager.generate`` path is stood in; every other line of it is slime's."""
SGLANG_ROUTER_VERSION: Final = "0.2.3"  # what slime's own stub says
_CRASH_INDEX = re.compile(r"\bidx=(\d+)\b")


def install_stubs() -> list[str]:
    """Stub ``ray``, ``sglang_router`` and ``transformers`` where they cannot be imported, exactly as
    slime's ``tests/plugin_contracts/_shared.py::install_stubs`` builds them, and ``sglang``'s three
    names ``slime.ray.rollout`` imports (``_stub_sglang``); return the modules stubbed."""
    stubbed = []
    for name in STUBBED:
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            continue
        module = types.ModuleType(name)
        if name == "ray":
            module._private = types.SimpleNamespace(  # type: ignore[attr-defined]
                services=types.SimpleNamespace(get_node_ip_address=lambda: "127.0.0.1")
            )
        elif name == "sglang_router":
            module.__version__ = SGLANG_ROUTER_VERSION  # type: ignore[attr-defined]
        elif name == "sglang":
            stubbed += _stub_sglang()
            continue
        else:
            module.AutoTokenizer = type(  # type: ignore[attr-defined]
                "AutoTokenizer", (), {"from_pretrained": staticmethod(lambda *a, **k: object())}
            )
            module.AutoProcessor = type(  # type: ignore[attr-defined]
                "AutoProcessor", (), {"from_pretrained": staticmethod(_no_processor)}
            )
            module.PreTrainedTokenizerBase = type("PreTrainedTokenizerBase", (), {})  # type: ignore[attr-defined]
            module.ProcessorMixin = type("ProcessorMixin", (), {})  # type: ignore[attr-defined]
        sys.modules[name] = module
        stubbed.append(name)
    return stubbed


def _no_processor(*args: object, **kwargs: object) -> object:
    raise OSError("transformers is stubbed: no processor")


def _stub_sglang() -> list[str]:
    """The three names ``slime.ray.rollout`` and the SGLang engine module import from SGLang at
    module level (memory-type tags, ``ServerArgs``, ``kill_process_tree``); the train-data path
    uses none of them, and the stub's ``ServerArgs`` and ``kill_process_tree`` refuse to run."""
    modules = {name: types.ModuleType(name) for name in SGLANG_MODULES}
    modules["sglang"].srt = modules["sglang.srt"]  # type: ignore[attr-defined]
    constants = modules["sglang.srt.constants"]
    constants.GPU_MEMORY_TYPE_WEIGHTS = "weights"  # type: ignore[attr-defined]
    constants.GPU_MEMORY_TYPE_KV_CACHE = "kv_cache"  # type: ignore[attr-defined]
    constants.GPU_MEMORY_TYPE_CUDA_GRAPH = "cuda_graph"  # type: ignore[attr-defined]
    modules["sglang.srt.server_args"].ServerArgs = type(  # type: ignore[attr-defined]
        "ServerArgs", (), {"__init__": _no_sglang}
    )
    modules["sglang.srt.utils"].kill_process_tree = _no_sglang  # type: ignore[attr-defined]
    for name, module in modules.items():
        sys.modules[name] = module
    return list(modules)


def _no_sglang(*args: object, **kwargs: object) -> None:
    raise RuntimeError("sglang is stubbed: no SGLang server is started or stopped here")


@dataclass(frozen=True, slots=True)
class _SlimeUpstream(Upstream):
    """slime's modules import once the three modules it does not need here are stubbed; when they
    still do not, the stubs go again, so a process that cannot run slime keeps no fake modules."""

    def require(self) -> None:
        stubbed = install_stubs()
        try:
            Upstream.require(self)
        except BaseException:
            for name in stubbed:
                sys.modules.pop(name, None)
            raise


GYM_CLIENT: Final = (
    "stand-in: the harness's GymClient (ctx.gym) runs each sample's /run from the adapter's "
    "custom-generate hook; slime has no NeMo Gym client of its own on this path"
)
"""What plays NeMo Gym's client here (``rollout-chaos gate`` reports it per side)."""
UPSTREAM = _SlimeUpstream(
    adapter="slime",
    modules=(ROLLOUT_MODULE, TRAJECTORY_MODULE, MANAGER_MODULE),
    install=(
        "pip install torch==2.13.0 ray numpy pillow aiohttp httpx pyarrow pybase64 pylatexenc sympy "
        "tqdm packaging pyyaml requests wandb"
    ),
)


# -- the generate hook slime calls ------------------------------------------------------------------
async def generate_with_gym(args: Namespace, sample: Any, sampling_params: dict[str, Any]) -> Any:
    """slime's custom-generate hook: the sample's NeMo Gym row through one agent ``/run``.

    Raises whatever the ``/run`` raised; fewer results than the one row asked for, or a result
    with no generation data, raise too. The sampling params are the agent's business (the row's
    ``responses_create_params``), so they are not used.
    """
    trajectory = importlib.import_module(TRAJECTORY_MODULE)
    row = sample.metadata[ROW_KEY]
    awaitables = list(args.rollout_chaos_gym.run_examples([row]))
    if len(awaitables) != 1:
        for extra in awaitables:
            _discard(extra)
        raise RuntimeError(
            f"row {sample.index}: requested 1 /run result from the Gym client, which returned "
            f"{len(awaitables)}"
        )
    _, result = await awaitables[0]
    records = [
        trajectory.TurnRecord(
            prompt_ids=turn.prompt_token_ids,
            output_ids=turn.generation_token_ids,
            finish_reason="stop",
            output_log_probs=turn.generation_log_probs,
        )
        for turn in results.turns_from_result(result)  # MalformedResultError without generation data
    ]
    segment = trajectory.merge_turns(records)
    trajectory.write_segment_to_sample(
        sample, segment, results.reward_of(result), args.rollout_chaos_tokenizer
    )
    if results.status_of(result) == "truncated":
        sample.status = type(sample).Status.TRUNCATED
    return sample


# -- the collector ---------------------------------------------------------------------------------
class SlimeCollector:
    """slime's group generation over the stack (module docstring: the choices and the mapping)."""

    styles = ("gym",)
    modes = ("train",)

    def __init__(self, ctx: CollectorContext) -> None:
        UPSTREAM.require()  # stubs and imports, once; a target naming this class skips adapters.load
        TrainerSettings("slime", ctx.settings.trainer_config, KNOWN).check()
        self.ctx = ctx
        self.rollout_id = -1

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        rollout = importlib.import_module(ROLLOUT_MODULE)
        groups = prompt_groups(rows)
        if not groups:
            return []
        await readiness.wait_for_policy(self.ctx, self.ctx.history)
        args = self.args(n_samples_per_prompt=len(groups[0]), groups=len(groups))
        samples = [
            [self.sample(row, index, number) for index, row in group] for number, group in enumerate(groups)
        ]
        crashes = CrashLog()
        logger = logging.getLogger(ROLLOUT_MODULE)
        logger.addHandler(crashes)
        rollout.GenerateState.clear_instances()
        try:
            state = rollout.GenerateState(args)
            finished = await self.step(state, samples)
            state.reset()
        finally:
            logger.removeHandler(crashes)
            rollout.GenerateState.clear_instances()
        self.rollout_id += 1
        by_row = {made.row_index: made for made in self.read(args, finished, crashes)}
        return [by_row[index] for group in groups for index, _ in group if index in by_row]

    def read(self, args: Namespace, finished: list[list[Any]], crashes: CrashLog) -> list[Rollout]:
        """The Rollouts of the step: read from the train data slime makes of the groups."""
        return read_train_data(self.train_data(args, finished), finished, crashes)

    def train_data(self, args: Namespace, finished: list[list[Any]]) -> dict[str, Any]:
        """slime's ``RolloutManager.generate`` on the groups, to the train data it would hand its
        training ranks; what slime raises on the way is raised, unchanged."""
        manager = train_manager(args, finished)
        call = {"call": f"{MANAGER_MODULE}.RolloutManager.generate", "rollout_id": self.rollout_id}
        history = self.ctx.history
        history.append(SOURCE, "invoke", "upstream", {**call, "stood_in": list(STOOD_IN)})
        try:
            data: dict[str, Any] = manager.generate(self.rollout_id)
        except BaseException as error:
            history.append(SOURCE, "fail", "upstream", {**call, "error": f"{type(error).__name__}: {error}"})
            raise
        history.append(SOURCE, "ok", "upstream", {**call, "samples": len(data["tokens"])})
        return data

    async def step(self, state: Any, samples: list[list[Any]]) -> list[list[Any]]:
        """``generate_rollout_async``'s wait loop: a group's exception ends the step, unchanged."""
        state.submit_generate_tasks(samples)
        finished: list[list[Any]] = []
        while len(finished) < len(samples):
            done, state.pendings = await asyncio.wait(state.pendings, return_when=asyncio.FIRST_COMPLETED)
            finished += [task.result() for task in done]
        return finished

    def args(self, *, n_samples_per_prompt: int, groups: int = 1) -> Namespace:
        """The slime arguments this path reads (``settings``), plus the hook's own two: the Gym
        client and the tokenizer."""
        taken = settings(self.ctx, n_samples_per_prompt=n_samples_per_prompt, groups=groups)
        taken.record(self.ctx.history, mode="train")
        return Namespace(
            **{item.key: item.value for item in taken.items},
            rollout_chaos_gym=self.ctx.gym,
            rollout_chaos_tokenizer=self.ctx.tokenizer if self.ctx.tokenizer is not None else _NoText(),
        )

    @staticmethod
    def sample(row: Row, index: int, group_index: int) -> Any:
        """A pending slime Sample for one row; its NeMo Gym row rides in ``metadata``."""
        types_module = importlib.import_module("slime.utils.types")
        request = row.get("responses_create_params")
        prompt = request.get("input", "") if isinstance(request, dict) else ""
        return types_module.Sample(
            group_index=group_index, index=index, prompt=prompt, metadata={ROW_KEY: dict(row)}
        )


def factory(ctx: CollectorContext) -> Collector:
    """``--rollout-chaos-target=slime``."""
    return SlimeCollector(ctx)


ARGUMENTS: Final = "slime/utils/arguments.py"
_TRAIN_DATA_DEFAULTS: Final[tuple[tuple[str, Any], ...]] = (
    ("advantage_estimator", "grpo"),
    ("rewards_normalization", True),
    ("reward_key", None),
    ("log_reward_category", None),
    ("rollout_num_gpus", None),
    ("use_fault_tolerance", False),
    ("load_debug_rollout_data", None),
    ("load_debug_rollout_data_subsample", None),
    ("save_debug_rollout_data", None),
    ("debug_rollout_only", False),
    ("custom_rollout_log_function_path", None),
    ("custom_reward_post_process_path", None),
    ("custom_convert_samples_to_train_data_path", None),
    ("use_wandb", False),
    ("use_tensorboard", False),
    ("wandb_always_use_train_step", False),
)
"""What ``RolloutManager.generate`` reads past generation, each slime's parser default."""


KNOWN: Final = (
    "hf_checkpoint",
    "custom_generate_function_path",
    "n_samples_per_prompt",
    "rollout_num_engines",
    "sglang_server_concurrency",
    "sglang_dp_size",
    "rollout_temperature",
    "rollout_top_p",
    "rollout_top_k",
    "rollout_max_response_len",
    "rollout_stop",
    "rollout_stop_token_ids",
    "rollout_skip_special_tokens",
    "rollout_seed",
    "sglang_enable_deterministic_inference",
    "group_rm",
    "partial_rollout",
    "mask_offpolicy_in_partial_rollout",
    "use_rollout_routing_replay",
    "ci_test",
    *(name for name, _ in _TRAIN_DATA_DEFAULTS),
    "rollout_batch_size",
    "grpo_std_normalization",
)
"""Every slime argument this path reads: what ``trainer_config`` may set (``slime.<name>``)."""


def settings(ctx: CollectorContext, *, n_samples_per_prompt: int, groups: int = 1) -> TrainerSettings:
    """The slime arguments, each slime's own parser default (``slime/utils/arguments.py`` and
    ``slime/backends/sglang_utils/arguments.py`` at both pinned trees) unless the run fixes it or
    the scenario's ``trainer_config`` asks otherwise; past generation, what
    ``RolloutManager.generate`` reads to the train data (``groups`` prompts in the batch)."""
    taken = TrainerSettings("slime", ctx.settings.trainer_config, KNOWN)
    taken.check()
    taken.run(
        "hf_checkpoint", str(bundled.tiny_model_dir()), "a checkpoint slime may load; nothing reads it here"
    )
    taken.run(
        "custom_generate_function_path",
        GENERATE_PATH,
        "generation goes through the Gym agents, by slime's own custom-generate hook",
    )
    taken.run("n_samples_per_prompt", n_samples_per_prompt, "the workload's generations per prompt")
    taken.run("rollout_num_engines", 1, "one policy server (slime counts its SGLang engines)")
    taken.run("sglang_dp_size", None, "one policy server, no data parallelism (SGLang's own argument)")
    taken.default(
        "sglang_enable_deterministic_inference",
        False,
        "slime/rollout/sglang_rollout.py:108, GenerateState: "
        "getattr(args, 'sglang_enable_deterministic_inference', False)",
    )
    where = f"{ARGUMENTS}, add_slime_arguments"
    for name, default in _SLIME_DEFAULTS:
        taken.default(name, default, where)
    taken.default(
        "sglang_server_concurrency", 512, "slime/backends/sglang_utils/arguments.py:39, add_sglang_arguments"
    )
    taken.run("rollout_batch_size", groups, "the workload's prompts: one rollout step collects them all")
    if n_samples_per_prompt == 1:
        taken.run(
            "grpo_std_normalization",
            False,
            f"{ARGUMENTS}, slime_validate_args: off when n_samples_per_prompt is 1",
        )
    else:
        taken.default("grpo_std_normalization", True, where)
    for name, default in _TRAIN_DATA_DEFAULTS:
        taken.default(name, default, where)
    return taken


_SLIME_DEFAULTS: Final[tuple[tuple[str, Any], ...]] = (
    ("rollout_temperature", 1.0),
    ("rollout_top_p", 1.0),
    ("rollout_top_k", -1),
    ("rollout_max_response_len", None),
    ("rollout_stop", None),
    ("rollout_stop_token_ids", None),
    ("rollout_skip_special_tokens", False),
    ("rollout_seed", 42),
    ("group_rm", False),
    ("partial_rollout", False),
    ("mask_offpolicy_in_partial_rollout", False),
    ("use_rollout_routing_replay", False),
    ("ci_test", False),
)
"""slime's parser defaults of the arguments this path reads (the hook ignores the sampling ones:
the agent samples; they still reach ``GenerateState``'s sampling params as slime builds them)."""


def prompt_groups(rows: Sequence[Row]) -> list[list[tuple[int, Row]]]:
    """Consecutive rows equal but for ``_rowidx`` are one prompt's group: ``(_rowidx, row)`` each."""
    groups: list[list[tuple[int, Row]]] = []
    previous: dict[str, Any] | None = None
    for position, row in enumerate(rows):
        prompt = {key: value for key, value in row.items() if key != "_rowidx"}
        if groups and prompt == previous:
            groups[-1].append((row_index(row, position), row))
        else:
            groups.append([(row_index(row, position), row)])
        previous = prompt
    sizes = sorted({len(group) for group in groups})
    if len(sizes) > 1:
        raise ValueError(
            f"slime generates n_samples_per_prompt samples for every prompt, but the rows make "
            f"groups of sizes {sizes}; give every prompt the same number of generations"
        )
    return groups


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


def read_train_data(data: dict[str, Any], finished: list[list[Any]], crashes: CrashLog) -> list[Rollout]:
    """One Rollout per sample of slime's train data, read from it: the tokens, response length,
    loss mask and rollout logprobs the trainer gets, the raw reward (``rewards`` holds the
    normalized advantages), truncation; the status and abort reason are the sample's own (the
    train data carries none). Each is marked in the train batch; a row slime handed back but left
    out of the train data comes back aborted, out of it."""
    samples = {}
    for group in finished:
        for element in group:
            sample = element[0] if isinstance(element, list) and element else element
            samples[sample.index] = (sample, element)
    rollouts = []
    seen = set()
    for position, index in enumerate(data["sample_indices"]):
        sample, element = samples[index]
        logprobs = data.get("rollout_log_probs")
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
        made = read_back(trained if not isinstance(element, list) else [trained], crashes)
        if data["truncated"][position] and made.status == "completed":
            made = replace(made, status="truncated")
        rollouts.append(replace(made, in_train_batch=True))
        seen.add(index)
    for index, (_, element) in samples.items():
        if index not in seen:
            made = read_back(element, crashes)
            error = f"slime left row {index} out of the train data" + (
                f": {made.error}" if made.error else ""
            )
            rollouts.append(replace(made, status="aborted", error=error, in_train_batch=False))
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
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


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


class _NoText:
    """A tokenizer for ``write_segment_to_sample`` when the context has none: no response text."""

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return ""


def _discard(awaitable: object) -> None:
    if asyncio.iscoroutine(awaitable):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()
