"""A small hand-written Gym runner for unit tests: scripted per-row behaviour, real asyncio.

Each row's script is a list of behaviours, one per attempt (the last repeats): ``ok``, ``nan``,
``null``, ``drift`` (repairable), ``bad_drift`` (not repairable), ``error`` (HTTP 500),
``refused`` (a status-less ``GymRequestError`` caused by a refused connection, as a client that
gives up would raise; the real ``GymClient`` retries instead), ``hang``. ``short`` makes the
next call yield fewer awaitables.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from typing import Any, Literal

from pytest_rollout_chaos.collector.gym_client import GymRequestError
from pytest_rollout_chaos.collector.protocol import CollectorContext, CollectorSettings
from pytest_rollout_chaos.history import History, fingerprint, logprob_digest
from pytest_rollout_chaos.servers.faultlayer.asked import asked

EOS = 2


def result_for(index: int, behaviour: str) -> dict[str, Any]:
    first_prompt = [1, 10 + index]
    first_gen = [20, 21, EOS]
    second_prompt = [*first_prompt, *first_gen, 30]
    if behaviour == "drift":
        second_prompt = [*first_prompt, 20, 99, EOS, 30]
    if behaviour == "bad_drift":
        second_prompt = [*first_prompt, 20, 99, 30]
    logprob: float | None = -0.5
    if behaviour == "nan":
        logprob = float("nan")
    if behaviour == "null":
        logprob = None
    output = [
        {"type": "function_call", "name": "calculator", "arguments": "{}", "call_id": "c1"},
        {
            "type": "message",
            "prompt_token_ids": first_prompt,
            "generation_token_ids": first_gen,
            "generation_log_probs": [-0.1, logprob, -0.3],
        },
        {"type": "function_call_output", "call_id": "c1", "output": "4"},
        {
            "type": "message",
            "prompt_token_ids": second_prompt,
            "generation_token_ids": [40, EOS],
            "generation_log_probs": [-0.4, -0.5],
        },
    ]
    if behaviour == "empty":  # one model call that generated no token
        output = [
            {
                "type": "message",
                "prompt_token_ids": first_prompt,
                "generation_token_ids": [],
                "generation_log_probs": [],
            }
        ]
    return {"response": {"output": output}, "reward": 1.0}


class FakeGym:
    def __init__(self, scripts: Mapping[int, Sequence[str]] | None = None, *, delay_s: float = 0.0) -> None:
        self.scripts = dict(scripts or {})
        self.delay_s = delay_s
        self.calls: dict[int, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.short_by = 0
        self.history: History | None = None  # set by ``context``: records as the fault layer would

    def run_examples(
        self, rows: Sequence[Mapping[str, Any]]
    ) -> Iterator[Awaitable[tuple[dict[str, Any], dict[str, Any]]]]:
        coros = [self._run(dict(row)) for row in rows]
        keep = max(0, len(coros) - self.short_by)
        self.short_by = 0
        for dropped in coros[keep:]:
            dropped.close()
        return iter(coros[:keep])

    async def _run(self, row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        index = int(row["_rowidx"])
        attempt = self.calls.get(index, 0)
        self.calls[index] = attempt + 1
        script = self.scripts.get(index, ["ok"])
        behaviour = script[min(attempt, len(script) - 1)]
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.history is not None:  # as ctx.gym records each row's /run it starts
            self.history.append("collector", "invoke", "run", {"row": index})
        self._record("invoke", index, **asked(row))
        try:
            await asyncio.sleep(self.delay_s)
            if behaviour == "hang":
                await asyncio.sleep(3600)
            if behaviour == "error":
                self._record("fail", index, status=500, body=f"\"ValueError('row {index}')\"")
                raise GymRequestError(
                    "calculator_agent", "http://127.0.0.1:1/run", 500, f"ValueError('row {index}')"
                )
            if behaviour == "refused":
                raise GymRequestError(
                    "calculator_agent", "http://127.0.0.1:1/run", None, "Cannot connect to host 127.0.0.1:1"
                ) from ConnectionRefusedError(111, "Connect call failed")
            result = result_for(index, behaviour)
            generated = [item for item in result["response"]["output"] if "generation_token_ids" in item]
            self._record(
                "ok",
                index,
                status=200,
                generations=[fingerprint(item["generation_token_ids"]) for item in generated],
                logprobs=[logprob_digest(item["generation_log_probs"]) for item in generated],
                reward=result["reward"],
            )
            return row, result
        finally:
            self.in_flight -= 1

    def _record(self, kind: Literal["invoke", "ok", "fail"], index: int, **data: Any) -> None:
        if self.history is not None:
            rid = f"fake-{index}-{self.calls[index]}"
            facts = {"link": "collector->agent:calculator_agent", "server": "calculator_agent", "row": index}
            self.history.append("agent", kind, "POST /run", {**facts, **data}, request_id=rid)


def rows(n: int, task: str = "calculator") -> list[dict[str, Any]]:
    return [
        {
            "responses_create_params": {"input": [{"role": "user", "content": f"what is {i} + 2?"}]},
            "agent_ref": {"name": "calculator_agent"},
            "task": task,
            "_rowidx": i,
        }
        for i in range(n)
    ]


def context(gym: FakeGym, **settings: Any) -> CollectorContext:
    gym.history = History()
    return CollectorContext(
        gym=gym,
        policy="",  # the agents drive generation; nothing for the collector to wait for
        env=None,
        tokenizer=None,
        settings=CollectorSettings(**settings),
        history=gym.history,
        eos_token_ids=(EOS,),
    )
