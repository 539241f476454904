"""The ``slime`` adapter: slime's real ``generate_and_rm_group`` collects the rows through our stack,
and slime's real ``RolloutManager`` turns them into the train data the rows are read from.

What runs is slime's own code (THUDM/slime, from the installed package or the tree that
``--rollout-chaos-upstream`` puts first): ``GenerateState`` (the real singleton, cleared before and
after every collection, so its semaphore belongs to the collection's event loop),
``GenerateState.submit_generate_tasks``, which starts one ``generate_and_rm_group`` task per
prompt group, ``generate_and_rm`` with its semaphore and custom-generate branch,
``slime.agent.trajectory`` to turn a trajectory into a training sample, and past generation
``RolloutManager.generate`` (``slime/ray/rollout.py``): ``_get_rollout_data`` (the rollout-id
check and the flattening of the groups), ``_log_rollout_data`` (``log_rollout_data`` on main:
``compute_metrics_from_samples``, ``compute_perf_metrics_from_samples``) and
``_convert_samples_to_train_data`` (reward normalization, loss masks). The adapter's own code is
the step loop around the group tasks (``generate_rollout_async``'s, checked by ``COPIED``), the
generate hook, the stand-ins past generation and the reading of the train data
(``slime_train_data``); all it stands in for is recorded with each call into slime
(``upstream_call``), and a failure's story lists it. slime's arguments are ``slime_settings``'s,
its imports ``slime_imports``'s.

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

The hook hands the ``/run`` result to slime's own trajectory code (``slime_trajectory``): on
trees before slime's ``TrajectoryManager`` (#2005), ``merge_turns`` and
``write_segment_to_sample`` make the one Sample; since, slime's agent adapter records each model
call and ``finish_session`` linearizes them into one Sample per chain (a fork where a prompt
drifts), a ``list[Sample]`` as slime's fan-out generate functions return. A result with no
generation data, or other than the one result the row asked for, raises.

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

What the pinned trees show on the catalog: before PR #2078 (and on main, which never merged it),
every scenario in which one trajectory's ``/run`` raises takes the step down in
``generate_and_rm_group`` (``isolated_failures``); at the PR's head the step goes on and goes down
in ``RolloutManager`` on the placeholder list instead (the same verdict, with slime's
``AttributeError``), and a batch that fails as a whole (every ``/run`` failing, a result the Gym
client lost) becomes a train batch of placeholders instead of an error (``train_batch_sound``,
``no_empty_epoch``). On all: no deadline anywhere on this path (a frozen agent or a black-holed
link hangs: ``bounded``) and non-finite logprobs pass through (``finite_logprobs``). On prefix
drift ``merge_turns`` drops or masks turns while the sample stays COMPLETED (``turns_generated``);
main's ``TrajectoryManager`` forks the row into samples of its own or masks a short drift instead.

Workloads: gym style, train mode (``eval_rollout`` does not go through ``generate_and_rm_group``);
other scenarios skip, saying so.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
from argparse import Namespace
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from pytest_rollout_chaos.collector import readiness
from pytest_rollout_chaos.collector.adapters import slime_trajectory
from pytest_rollout_chaos.collector.adapters.copied import CopiedFrom
from pytest_rollout_chaos.collector.adapters.slime_imports import (
    MANAGER_MODULE,
    ROLLOUT_MODULE,
    TRAJECTORY_MODULE,
    install_stubs,
)
from pytest_rollout_chaos.collector.adapters.slime_settings import KNOWN, settings
from pytest_rollout_chaos.collector.adapters.slime_train_data import (
    STOOD_IN,
    CrashLog,
    loss_reduction,
    read_train_data,
    train_manager,
)
from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings
from pytest_rollout_chaos.collector.adapters.upstream import Upstream
from pytest_rollout_chaos.collector.protocol import (
    Collector,
    CollectorContext,
    Mode,
    Rollout,
    Row,
    row_index,
)
from pytest_rollout_chaos.history import History

ROW_KEY: Final = "nemo_gym_row"
SOURCE: Final = "collector"
READ_OUT: Final = "the train data RolloutManager.generate hands the training ranks"
"""Where the Rollouts are read from (``upstream_calls``)."""


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
HOOK: Final = (
    "the generate hook (slime's --custom-generate-function-path, the adapter's own in place of an "
    "agent example's generate): one NeMo Gym /run per sample; it raises, in its own words, when the "
    "Gym client returns other than the one result asked for (slime has no such count) or a result "
    "has no generation data"
)
LOOP: Final = (
    "generate_rollout_async's loop (the adapter's step: every group submitted at once, each finished "
    "task's result read as slime reads it); left out: its group-size assert, the dynamic filter and "
    "the sample filters (none by default), and the router abort() after the batch (no router here)"
)
GENERATION_CALL: Final = f"{ROLLOUT_MODULE}.generate_and_rm_group, a task per group"
COPIED: Final = CopiedFrom(
    module=ROLLOUT_MODULE,
    function="generate_rollout_async",
    fingerprints=frozenset({"21618657d120027f", "75ce318e2e17b185"}),
    trees="slime fec3da9b and 1bc255ed (PR #2078's base and head) and 624b824a (main)",
)
"""The adapter's ``step`` and the rollout function's sort are ``generate_rollout_async``'s lines."""
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
    trajectory = importlib.import_module(TRAJECTORY_MODULE)
    return await slime_trajectory.samples_of(trajectory, sample, row, result, args.rollout_chaos_tokenizer)


# -- the collector ---------------------------------------------------------------------------------
class SlimeCollector:
    """slime's group generation over the stack (module docstring: the choices and the mapping)."""

    styles = ("gym",)
    modes = ("train",)
    own_concurrency = (
        "generate_and_rm's semaphore, sized by slime's own arguments (sglang_server_concurrency times "
        "the rollout engines)"
    )

    def __init__(self, ctx: CollectorContext) -> None:
        UPSTREAM.require()  # stubs and imports, once; a target naming this class skips adapters.load
        TrainerSettings("slime", ctx.settings.trainer_config, KNOWN).check()
        self.ctx = ctx
        self.rollout_id = -1

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        COPIED.require()  # declines on a tree whose generate_rollout_async is not the one copied
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
        call = {"call": GENERATION_CALL, "rollout_id": self.rollout_id + 1}
        try:
            with upstream_call(self.ctx.history, call, generation_stood_in()) as done:
                state = rollout.GenerateState(args)
                finished = await self.step(state, samples)
                state.reset()
                done["groups"] = len(finished)
        finally:
            logger.removeHandler(crashes)
            rollout.GenerateState.clear_instances()
        self.rollout_id += 1
        by_row = {made.row_index: made for made in self.read(args, finished, crashes)}
        return [by_row[index] for group in groups for index, _ in group if index in by_row]

    def read(self, args: Namespace, finished: list[list[Any]], crashes: CrashLog) -> list[Rollout]:
        """The Rollouts of the step: read from the train data slime makes of the groups."""
        fan_out = slime_trajectory.uses_manager(importlib.import_module(TRAJECTORY_MODULE))
        data = self.train_data(args, finished)
        return read_train_data(data, finished, crashes, reduction=loss_reduction(args), fan_out=fan_out)

    def train_data(self, args: Namespace, finished: list[list[Any]]) -> dict[str, Any]:
        """slime's ``RolloutManager.generate`` on the groups, to the train data it would hand its
        training ranks; what slime raises on the way is raised, unchanged."""
        manager = train_manager(args, finished)
        call = {"call": f"{MANAGER_MODULE}.RolloutManager.generate", "rollout_id": self.rollout_id}
        with upstream_call(self.ctx.history, call, list(STOOD_IN), read_out=READ_OUT) as done:
            data: dict[str, Any] = manager.generate(self.rollout_id)
            done["samples"] = len(data["tokens"])
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


def generation_stood_in() -> list[str]:
    """What of slime's generation this collection stands in for, on the tree in use."""
    manager = slime_trajectory.uses_manager(importlib.import_module(TRAJECTORY_MODULE))
    return [
        GYM_CLIENT,
        HOOK,
        *slime_trajectory.STOOD_IN,
        *(slime_trajectory.MANAGER_STOOD_IN if manager else ()),
        LOOP,
    ]


@contextmanager
def upstream_call(
    history: History, call: dict[str, Any], stood_in: list[str], *, read_out: str = ""
) -> Iterator[dict[str, Any]]:
    """Record one call into slime's code with what it stands in for (and ``read_out``, where the
    Rollouts are read from its output), then how it ended (the dict yielded: what to record with
    ``ok``); what slime raises is raised, unchanged."""
    history.append(
        SOURCE,
        "invoke",
        "upstream",
        {**call, "stood_in": stood_in, **({"read_out": read_out} if read_out else {})},
    )
    done: dict[str, Any] = {}
    try:
        yield done
    except BaseException as error:
        history.append(SOURCE, "fail", "upstream", {**call, "error": f"{type(error).__name__}: {error}"})
        raise
    history.append(SOURCE, "ok", "upstream", {**call, **done})


def factory(ctx: CollectorContext) -> Collector:
    """``--rollout-chaos-target=slime``."""
    return SlimeCollector(ctx)


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


class _NoText:
    """A tokenizer for ``write_segment_to_sample`` when the context has none: no response text."""

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return ""


def _discard(awaitable: object) -> None:
    if asyncio.iscoroutine(awaitable):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()
