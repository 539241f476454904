"""A collector for each workload style, written from the docs' "Writing a collector" page alone.

Run the catalog against it: pytest --rollout-chaos --rollout-chaos-target=my_collectors:make_collector
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import aiohttp

from pytest_rollout_chaos import (
    CollectionError,
    Collector,
    CollectorContext,
    GymRequestError,
    InfrastructureError,
    Mode,
    Rollout,
    RolloutStatus,
    Row,
    ShortCountError,
    Turn,
)


def make_collector(ctx: CollectorContext) -> Collector:
    """The factory named by --rollout-chaos-target: one collector per scenario, by its style."""
    return NativeCollector(ctx) if ctx.settings.style == "native" else GymCollector(ctx)


class GymCollector:
    """The agents own the loop: one /run per row through ctx.gym; a row's failure stays that row's."""

    styles = ("gym",)
    own_concurrency = "every row's /run at once"  # no limit of ctx.settings.max_concurrency to hold it to

    def __init__(self, ctx: CollectorContext) -> None:
        self.ctx = ctx
        self.rows: Sequence[Row] = ()
        self.answered: set[int] = set()  # rows whose /run brought a result

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        self.rows = rows
        return await collect_logged(self.ctx, rows, mode, lambda: gather_or_raise(map(self.one_row, rows)))

    async def one_row(self, row: Row) -> Rollout:
        index, agent = row["_rowidx"], row["agent_ref"]["name"]
        for attempt in range(1, self.ctx.settings.max_logprob_attempts + 1):
            awaitables = list(self.ctx.gym.run_examples([row]))
            if len(awaitables) != 1:
                raise ShortCountError(f"requested 1 result for row {index}, returned {len(awaitables)}")
            limit = self.ctx.settings.request_timeout_s
            try:  # ctx.gym, like NeMo Gym's, never gives up on its own: the deadline is ours
                async with asyncio.timeout(limit):
                    _, result = await awaitables[0]
            except TimeoutError:
                if (why := await self.agent_gone(agent)) is not None:  # an outage, not one bad row
                    mine = [other["_rowidx"] for other in self.rows if other["agent_ref"]["name"] == agent]
                    lost = [other for other in mine if other not in self.answered]
                    raise InfrastructureError(
                        f"agent {agent!r} is gone ({why}): no /run result for row {index} within "
                        f"request_timeout_s={limit}; its rows without a result cannot complete: {lost}"
                    ) from None
                error = f"no /run result within request_timeout_s={limit} (agent {agent!r} frozen or hung)"
                return Rollout(index, "aborted", error=error, attempts=attempt)
            except GymRequestError as error:  # an error status, or an answer cut off: this row's failure
                return Rollout(index, "aborted", error=str(error), attempts=attempt)
            self.answered.add(index)
            try:
                turns = turns_of(result)
            except (KeyError, TypeError, ValueError) as error:
                return Rollout(index, "aborted", error=f"unreadable /run result: {error!r}", attempts=attempt)
            problem = bad_logprob(turns)
            if problem is None:
                try:
                    spliced = splice_drift(turns, self.ctx.eos_token_ids)
                except DriftError as drift:
                    return Rollout(index, "aborted", turns=turns, error=str(drift), attempts=attempt)
                reward = float(result.get("reward") or 0.0)
                return Rollout(index, status_of(result), reward, spliced, attempts=attempt)
            self.ctx.history.append(
                "collector", "info", "retry", {"row": index, "attempt": attempt, "reason": problem}
            )
        return Rollout(index, "aborted", error=f"{problem}, after {attempt} attempts", attempts=attempt)

    async def agent_gone(self, agent: str) -> str | None:
        """Why ``agent`` is gone for good (it refuses the connection), or None: it still answers,
        or holds the probe (frozen or busy), or the Gym client cannot say where it is."""
        try:
            url = await self.ctx.gym.agent_url(agent)  # type: ignore[attr-defined]  # ctx.gym has it; GymRunner doesn't
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1)) as http,
                http.get(url + "/"),
            ):
                return None
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as error:
            return repr(error)
        except Exception:
            return None


class NativeCollector:
    """The collector drives generation against ctx.policy and steps ctx.env once per task per turn."""

    styles = ("native",)

    def __init__(self, ctx: CollectorContext) -> None:
        self.ctx = ctx

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        return await collect_logged(self.ctx, rows, mode, lambda: self.loop(rows))

    async def loop(self, rows: Sequence[Row]) -> list[Rollout]:
        samples = [Sample(row) for row in rows]
        timeout = aiohttp.ClientTimeout(total=self.ctx.settings.request_timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            for turn in range(self.ctx.settings.max_turns):
                active = [sample for sample in samples if not sample.done]
                if not active:
                    break
                await gather_or_raise(self.generate(http, sample) for sample in active)
                by_task: dict[str, list[Sample]] = {}
                for sample in active:
                    if not sample.done:
                        by_task.setdefault(sample.row["task"], []).append(sample)
                await gather_or_raise(self.step(task, group, turn) for task, group in by_task.items())
        return [sample.rollout(self.ctx.eos_token_ids) for sample in samples]

    async def generate(self, http: aiohttp.ClientSession, sample: Sample) -> None:
        settings, url = self.ctx.settings, server_root(self.ctx.policy) + "/v1/chat/completions"
        body = {
            "model": self.ctx.model,
            "messages": sample.messages,
            "max_tokens": settings.max_new_tokens,
            "temperature": settings.temperature,
            "logprobs": True,
            "return_token_ids": True,  # vLLM: prompt_token_ids and each choice's token_ids
        }
        if tools := chat_tools(sample.row):  # the environment reads tool calls from the text
            body |= {"tools": tools, "tool_choice": "none"}
        for attempt in range(1, settings.max_logprob_attempts + 1):
            sample.attempts = max(sample.attempts, attempt)  # the most tries one turn took
            try:
                async with http.post(url, json=body) as response:
                    if response.status >= 400:
                        text = await response.text()
                        sample.abort(f"policy answered HTTP {response.status}: {text[:200]}")
                        return
                    answer = await response.json()
            except (aiohttp.ClientConnectionError, TimeoutError) as error:
                raise InfrastructureError(f"policy {url} unreachable: {error!r}") from error
            choice = answer["choices"][0]
            logprobs = [entry["logprob"] for entry in choice["logprobs"]["content"]]
            turn = Turn(answer["prompt_token_ids"], choice["token_ids"], logprobs)
            problem = bad_logprob([turn])
            if problem is None:
                sample.turns.append(turn)
                sample.messages.append({"role": "assistant", "content": choice["message"]["content"]})
                sample.truncated = choice["finish_reason"] == "length"
                sample.done = sample.truncated
                return
            self.ctx.history.append(
                "collector", "info", "retry", {"row": sample.index, "attempt": attempt, "reason": problem}
            )
        sample.abort(f"{problem}, after {sample.attempts} attempts")

    async def step(self, task: str, group: list[Sample], turn: int) -> None:
        """ONE env.step for every active sample of ``task``, recorded for batched_env_eval."""
        self.ctx.history.append(
            "collector", "info", "env_step", {"task": task, "batch_size": len(group), "turn": turn}
        )
        assert self.ctx.env is not None  # native-style scenarios always give an environment
        try:
            stepped = await self.ctx.env.step([s.messages for s in group], [dict(s.row) for s in group])
        except Exception as error:
            for sample in group:
                sample.abort(f"env.step for task {task!r} failed: {error!r}")
            return
        for position, sample in enumerate(group):
            sample.reward += stepped.rewards[position]
            if stepped.terminateds[position]:
                sample.done = True
            else:
                sample.messages.append(stepped.observations[position])


class Sample:
    """One row's conversation in the native loop."""

    def __init__(self, row: Row) -> None:
        self.row, self.index = row, row["_rowidx"]
        self.messages: list[dict[str, Any]] = list(row["responses_create_params"]["input"])
        self.turns: list[Turn] = []
        self.reward, self.attempts = 0.0, 1
        self.done = self.truncated = False
        self.error: str | None = None

    def abort(self, error: str) -> None:
        self.done, self.error = True, error

    def rollout(self, eos_token_ids: Sequence[int]) -> Rollout:
        turns = self.turns
        if self.error is None and turns:
            try:
                turns = splice_drift(turns, eos_token_ids)
            except DriftError as drift:
                self.error = str(drift)
        if self.error is not None or not turns:
            error = self.error or "no turn was generated"
            return Rollout(self.index, "aborted", 0.0, self.turns, error, self.attempts)
        status: RolloutStatus = "completed" if self.done and not self.truncated else "truncated"
        return Rollout(self.index, status, self.reward, turns, None, self.attempts)


# -- shared by both styles -------------------------------------------------------------------


async def collect_logged(
    ctx: CollectorContext, rows: Sequence[Row], mode: Mode, work: Callable[[], Awaitable[list[Rollout]]]
) -> list[Rollout]:
    """Run ``work`` (see ``checked``) and log the collection to ctx.history as Jepsen-style events."""
    ctx.history.append("collector", "invoke", "collect", {"rows": len(rows), "mode": mode})
    try:
        rollouts = await checked(ctx, rows, work)
    except BaseException as error:
        ctx.history.append("collector", "fail", "collect", {"error": f"{type(error).__name__}: {error}"})
        raise
    ctx.history.append("collector", "ok", "collect", {"returned": len(rollouts)})
    return rollouts


async def checked(
    ctx: CollectorContext, rows: Sequence[Row], work: Callable[[], Awaitable[list[Rollout]]]
) -> list[Rollout]:
    """Wait for the policy, run ``work`` within the deadline, fail when too many rows aborted, and
    say which rollouts the trainer trains on."""
    await wait_for_policy(ctx)
    try:
        async with asyncio.timeout(ctx.settings.collect_timeout_s):
            rollouts = await work()
    except TimeoutError as error:
        limit = ctx.settings.collect_timeout_s
        raise CollectionError(f"{len(rows)} rows not collected within collect_timeout_s={limit}") from error
    aborted = [rollout for rollout in rollouts if rollout.status == "aborted"]
    if len(aborted) > ctx.settings.max_aborted_fraction * len(rollouts):
        raise CollectionError(f"{len(aborted)} of {len(rollouts)} rows aborted, e.g. {aborted[0].error}")
    return drop_broken_groups(ctx, rows, rollouts)


def drop_broken_groups(ctx: CollectorContext, rows: Sequence[Row], rollouts: list[Rollout]) -> list[Rollout]:
    """Leave each GRPO group with an aborted member out of the train batch, whole: a placeholder
    kept in its group, even loss-masked, still shifts its siblings' advantages."""
    by_row = {rollout.row_index: rollout for rollout in rollouts}
    for group in grpo_groups(rows):
        failed = [index for index in group if by_row[index].status == "aborted"]
        if len(group) > 1 and failed:
            for index in group:
                by_row[index] = replace(by_row[index], in_train_batch=False)
            ctx.history.append("collector", "info", "group_dropped", {"rows": group, "failed": failed})
    return [by_row[rollout.row_index] for rollout in rollouts]


def grpo_groups(rows: Sequence[Row]) -> list[list[int]]:
    """The ``_rowidx`` of each GRPO group: a run of consecutive rows equal but for ``_rowidx``."""

    def prompt(row: Row) -> dict[str, Any]:
        return {key: value for key, value in row.items() if key != "_rowidx"}

    return [[row["_rowidx"] for row in group] for _, group in itertools.groupby(rows, key=prompt)]


async def wait_for_policy(ctx: CollectorContext) -> None:
    """Poll the policy's /health until it answers, as a trainer waits for vLLM to load."""
    url = server_root(ctx.policy) + "/health"
    deadline = asyncio.get_running_loop().time() + ctx.settings.policy_ready_timeout_s
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while True:
            try:
                async with http.get(url) as response:
                    if response.status < 500:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise InfrastructureError(f"policy {url} not ready within policy_ready_timeout_s")
            await asyncio.sleep(0.1)


async def gather_or_raise(awaitables: Iterable[Awaitable[Any]]) -> list[Any]:
    """Await all; the first exception cancels the others and is raised itself (not a group)."""

    async def run(awaitable: Awaitable[Any]) -> Any:
        return await awaitable

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(run(awaitable)) for awaitable in awaitables]
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0]  # noqa: B904 - its own cause chain is the story
    return [task.result() for task in tasks]


def status_of(result: Mapping[str, Any]) -> RolloutStatus:
    """``truncated`` when the last model call stopped at its token limit: NeMo Gym's Responses API
    says so in ``response.incomplete_details.reason == "max_output_tokens"``; a trainer must not
    train on a cut generation as if it ended on its own."""
    details = (result.get("response") or {}).get("incomplete_details") or {}
    return "truncated" if details.get("reason") == "max_output_tokens" else "completed"


def turns_of(result: Mapping[str, Any]) -> list[Turn]:
    """The model calls of a /run result: output items that carry generation_token_ids."""
    turns = [
        Turn(item["prompt_token_ids"], item["generation_token_ids"], item["generation_log_probs"])
        for item in result["response"]["output"]
        if item.get("generation_token_ids")
    ]
    if not turns:
        raise ValueError("no output item carries generation_token_ids")
    return turns


def bad_logprob(turns: list[Turn]) -> str | None:
    for number, turn in enumerate(turns):
        if len(turn.generation_log_probs) != len(turn.generation_token_ids):  # one per generated token
            return f"turn {number} has {len(turn.generation_log_probs)} logprobs for its tokens"
        for position, value in enumerate(turn.generation_log_probs):
            if not isinstance(value, int | float) or not math.isfinite(value):
                return f"non-finite logprob {value!r} at turn {number}, token {position}"
    return None


class DriftError(ValueError):
    """A turn's prompt drifted from the tokens before it, with no end of turn to splice at."""


def splice_drift(turns: list[Turn], eos_token_ids: Sequence[int]) -> list[Turn]:
    """Each turn's prompt must extend the previous prompt + generation, or the trainer sees tokens
    the model never produced (re-rendering through the chat template changes earlier turns). A
    drifted prompt is repaired by EOS-boundary splicing: the model's own tokens, then what the
    drifted prompt holds after the end of the previous turn (the EOS that generation stopped on,
    at the same ordinal); raise ``DriftError`` where no such end of turn is left."""
    spliced = turns[:1]
    for number, turn in enumerate(turns[1:], start=1):
        before = spliced[-1].prompt_token_ids + spliced[-1].generation_token_ids
        prompt = turn.prompt_token_ids
        if prompt[: len(before)] != before:
            stop = before[-1]  # a turn cut at the token limit has no end to splice at
            ends = [position for position, token in enumerate(prompt) if token == stop]
            ordinal = before.count(stop)  # drift changes tokens inside turns, not how many turns
            if stop not in eos_token_ids or len(ends) < ordinal or ends[ordinal - 1] == len(prompt) - 1:
                raise DriftError(
                    f"prefix drift: turn {number}'s prompt does not extend turn {number - 1}'s tokens, "
                    f"and no EOS boundary is left to splice at (turn {number - 1} ended on id {stop})"
                )
            prompt = before + prompt[ends[ordinal - 1] + 1 :]
        spliced.append(replace(turn, prompt_token_ids=prompt))
    return spliced


def server_root(policy: str) -> str:
    """ctx.policy is an OpenAI base URL ending in /v1; /health and /tokenize live beside it."""
    return policy.rstrip("/").removesuffix("/v1")


def chat_tools(row: Row) -> list[dict[str, Any]]:
    """The row's Responses-API tools in Chat Completions form."""
    tools = row["responses_create_params"].get("tools", [])
    keys = ("name", "description", "parameters")
    return [{"type": "function", "function": {key: tool[key] for key in keys}} for tool in tools]
