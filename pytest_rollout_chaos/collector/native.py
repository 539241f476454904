"""The reference collector's native style: it drives generation itself, as NeMo RL's multi-turn loop.

Each sample generates asynchronously against the policy's ``/v1/chat/completions``; then, per
turn, exactly ONE batched ``env.step`` per task group covers every active sample of that task
(the behaviour NeMo RL PR #2209 restores for validation). A sample's failure aborts that sample
only; non-finite logprobs are regenerated a bounded number of times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from pytest_rollout_chaos.collector import results
from pytest_rollout_chaos.collector.failures import all_or_first_error, is_unreachable, root_cause
from pytest_rollout_chaos.collector.prefix import SpliceError, repair_turns
from pytest_rollout_chaos.collector.protocol import (
    CollectorContext,
    InfrastructureError,
    Mode,
    Rollout,
    RolloutStatus,
    Row,
    Turn,
)

SOURCE = "collector"


@dataclass(slots=True)
class _Sample:
    index: int
    row: Row
    messages: list[dict[str, Any]]
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    done: bool = False
    truncated: bool = False
    error: str | None = None
    attempts: int = 1


def task_of(row: Row) -> str:
    """The task group a row belongs to: its ``task`` key, else its agent's name."""
    task = row.get("task")
    if isinstance(task, str):
        return task
    agent = row.get("agent_ref")
    return str(agent.get("name")) if isinstance(agent, Mapping) else "default"


def chat_tools(row: Row) -> list[dict[str, Any]]:
    """The row's Responses-API tools in Chat Completions form."""
    params = row.get("responses_create_params")
    tools = params.get("tools") if isinstance(params, Mapping) else None
    converted = []
    for tool in tools or ():
        if isinstance(tool, Mapping) and "function" not in tool:
            described = {key: tool[key] for key in ("name", "description", "parameters") if key in tool}
            converted.append({"type": "function", "function": described})
        elif isinstance(tool, Mapping):
            converted.append(dict(tool))
    return converted


def initial_messages(row: Row) -> list[dict[str, Any]]:
    params = row.get("responses_create_params")
    given = params.get("input") if isinstance(params, Mapping) else None
    if isinstance(given, str):
        return [{"role": "user", "content": given}]
    if isinstance(given, list):
        return [
            {"role": str(item.get("role", "user")), "content": item.get("content", "")}
            for item in given
            if isinstance(item, Mapping)
        ]
    raise ValueError(f"row {row.get('_rowidx')!r} has no responses_create_params.input")


class NativeLoop:
    """One collection in native style; record ``env_step`` per batched environment call."""

    def __init__(self, ctx: CollectorContext) -> None:
        if ctx.env is None:
            raise ValueError("native style needs CollectorContext.env (the batched environment)")
        self.ctx = ctx
        self.env = ctx.env
        self.settings = ctx.settings

    async def run(self, rows: Sequence[Row], indices: list[int], mode: Mode) -> list[Rollout]:
        samples = [
            _Sample(index, row, initial_messages(row)) for row, index in zip(rows, indices, strict=True)
        ]
        timeout = aiohttp.ClientTimeout(total=self.settings.request_timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for turn in range(self.settings.max_turns):
                active = [sample for sample in samples if not sample.done]
                if not active:
                    break
                await all_or_first_error(self._generate(session, sample) for sample in active)
                groups = self._groups([sample for sample in active if not sample.done])
                await all_or_first_error(self._step(task, group, turn) for task, group in groups.items())
        return [self._finish(sample) for sample in samples]

    def _groups(self, samples: list[_Sample]) -> dict[str, list[_Sample]]:
        """This turn's task groups: one batched env.step each."""
        groups: dict[str, list[_Sample]] = {}
        for sample in samples:
            groups.setdefault(task_of(sample.row), []).append(sample)
        return groups

    @property
    def _server_url(self) -> str:
        """The policy's root URL: ``ctx.policy`` may be given with or without OpenAI's ``/v1``."""
        return self.ctx.policy.rstrip("/").removesuffix("/v1")

    async def _generate(self, session: aiohttp.ClientSession, sample: _Sample) -> None:
        """One model call for one sample, retried on non-finite logprobs; failures abort it."""
        for attempt in range(1, self.settings.max_logprob_attempts + 1):
            sample.attempts = max(sample.attempts, attempt)
            try:
                turn, text, finish = await self._chat(session, sample.messages, chat_tools(sample.row))
            except Exception as error:
                if is_unreachable(error):
                    raise InfrastructureError(
                        f"policy unreachable while generating row {sample.index}: {root_cause(error)}; "
                        "failing fast instead of retrying a dead server"
                    ) from error
                if isinstance(error, TimeoutError):
                    limit = self.settings.request_timeout_s
                    self._abort(sample, f"generation failed: no answer from the policy within {limit} s")
                    return
                self._abort(sample, f"generation failed: {root_cause(error)}")
                return
            bad = results.bad_logprob([turn])
            if bad is None:
                break
            self.ctx.history.append(
                SOURCE, "info", "retry", {"row": sample.index, "attempt": attempt, "reason": bad}
            )
        else:
            self._abort(sample, f"{bad} (still after {self.settings.max_logprob_attempts} attempts)")
            return
        try:
            sample.turns = repair_turns([*sample.turns, turn], self.ctx.eos_token_ids)
        except SpliceError as error:
            sample.turns.append(turn)
            self._abort(sample, str(error))
            return
        sample.messages.append({"role": "assistant", "content": text})
        if finish == "length":
            sample.done = sample.truncated = True

    async def _chat(
        self, session: aiohttp.ClientSession, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> tuple[Turn, str, str]:
        body: dict[str, Any] = {
            "model": self.ctx.model,
            "messages": messages,
            "max_tokens": self.settings.max_new_tokens,
            "temperature": self.settings.temperature,
            "logprobs": True,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
        }
        if tools:
            # The environment parses tool calls from the text, as NeMo RL's environments do.
            body |= {"tools": tools, "tool_choice": "none"}
        async with session.post(f"{self._server_url}/v1/chat/completions", json=body) as response:
            if response.status >= 400:
                raise RuntimeError(f"policy answered HTTP {response.status}: {(await response.text())[:200]}")
            payload = await response.json()
        choice = payload["choices"][0]
        content = (choice.get("logprobs") or {}).get("content") or []
        logprobs = [entry.get("logprob") for entry in content]
        generated = choice.get("token_ids") or [int(str(entry["token"]).split(":")[-1]) for entry in content]
        prompt = payload.get("prompt_token_ids") or choice.get("prompt_token_ids")
        if prompt is None:
            prompt = await self._tokenize(session, messages)
        text = str((choice.get("message") or {}).get("content") or "")
        turn = Turn([int(t) for t in prompt], [int(t) for t in generated], logprobs)
        return turn, text, str(choice.get("finish_reason") or "stop")

    async def _tokenize(self, session: aiohttp.ClientSession, messages: list[dict[str, Any]]) -> list[int]:
        body = {"model": self.ctx.model, "messages": messages, "add_generation_prompt": True}
        async with session.post(f"{self._server_url}/tokenize", json=body) as response:
            response.raise_for_status()
            return [int(token) for token in (await response.json())["tokens"]]

    async def _step(self, task: str, group: list[_Sample], turn: int) -> None:
        """ONE batched env.step over every active sample of ``task``."""
        self.ctx.history.append(
            SOURCE, "info", "env_step", {"task": task, "batch_size": len(group), "turn": turn}
        )
        try:
            returned = await self.env.step([s.messages for s in group], [dict(s.row) for s in group])
        except Exception as error:
            for sample in group:
                self._abort(sample, f"env.step for task {task!r} failed: {root_cause(error)}")
            return
        observations = list(returned.observations)
        rewards = [float(value) for value in returned.rewards]
        terminateds = [bool(value) for value in returned.terminateds]
        for position, sample in enumerate(group):
            sample.reward += rewards[position]
            if terminateds[position]:
                sample.done = True
            else:
                sample.messages.append(dict(observations[position]))

    def _abort(self, sample: _Sample, error: str) -> None:
        sample.done = True
        sample.error = error

    def _finish(self, sample: _Sample) -> Rollout:
        if sample.error is not None:
            return results.aborted(sample.index, sample.error, attempts=sample.attempts, turns=sample.turns)
        if not sample.turns:
            return results.aborted(sample.index, "no turn was generated", attempts=sample.attempts)
        status: RolloutStatus = "truncated" if sample.truncated or not sample.done else "completed"
        return Rollout(sample.index, status, sample.reward, sample.turns, None, sample.attempts)
