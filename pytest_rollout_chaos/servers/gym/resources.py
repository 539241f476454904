"""The resources server: sessions, the calculator tool, ``/verify`` and batched ``/step_batch``.

NeMo Gym's resources-server contract (``base_resources_server.py``): ``POST /seed_session``
starts a session carried by a cookie, ``POST /<tool>`` runs a tool, ``POST /verify`` returns the
request plus ``reward`` (and ``failure_reason``). ``POST /step_batch`` is NeMo RL's
``EnvironmentInterface.step`` over HTTP: batched message logs and metadata in; observations,
metadata, next stop strings, rewards, terminateds and answers out. Its cost is real: a sleep
per call plus a sleep per item, both settable at start and at run time, and every call is
recorded as an ``info step_batch`` event with its batch size and, per item, its task and how many
model turns its message log holds (``batched_env_eval`` judges from it), its row and the text of its
last model turn (fingerprinted), and its answer as an ``ok step_batch_rewards`` event with each
item's row (``_rowidx``), reward, observation (fingerprinted) and whether it ended.

A scenario may make the verifier score like a stochastic judge (``/_gym/rescore``): each time a row
is scored again (``/verify``, or an item of ``/step_batch``; rows by ``_rowidx``), its reward is
``bonus`` higher than the time before, so a row's attempts earn different rewards and a reward
taken from the wrong attempt shows. It may also spread a group's rewards (``/_gym/spread``): each
row scores ``spread`` times ``_rowidx mod 4`` above what its answer earns, so the members of a GRPO
group (consecutive rows) earn different rewards, as a real verifier's partial credit gives, and a
group left out of training had something to teach.

Run as ``python -m pytest_rollout_chaos.servers.gym.resources [--step-latency-ms N]
[--step-item-latency-ms N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web

from pytest_rollout_chaos.history import EventWriter, text_fingerprint
from pytest_rollout_chaos.servers import serve
from pytest_rollout_chaos.servers.gym import tasks
from pytest_rollout_chaos.servers.gym.base import gym_app, json_object
from pytest_rollout_chaos.servers.loopback import loopback_only

SESSION_COOKIE: Final = "session"
WRITER_KEY: Final = web.AppKey("resources_events", EventWriter)


@dataclass(slots=True)
class Latency:
    """Environment cost of one ``/step_batch`` call: fixed part plus a part per item."""

    per_call_ms: float = 0.0
    per_item_ms: float = 0.0

    def seconds_for(self, batch_size: int) -> float:
        return (self.per_call_ms + self.per_item_ms * batch_size) / 1000.0


@dataclass(slots=True)
class ResourcesState:
    """Per-test server state: sessions and the current latency (``/_gym/reset`` restores it)."""

    initial: Latency
    latency: Latency = field(default_factory=Latency)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    step_batch_calls: int = 0
    rescore_bonus: float = 0.0
    reward_spread: float = 0.0
    scored: dict[object, int] = field(default_factory=dict)  # _rowidx -> times scored

    def reset(self) -> None:
        self.latency = Latency(self.initial.per_call_ms, self.initial.per_item_ms)
        self.sessions.clear()
        self.step_batch_calls = 0
        self.rescore_bonus = 0.0
        self.reward_spread = 0.0
        self.scored.clear()

    def rescored(self, row: object, reward: float) -> float:
        """``reward`` plus ``rescore_bonus`` for each earlier time ``row`` was scored, plus
        ``reward_spread`` times the row's place in a run of four (``_rowidx mod 4``)."""
        if isinstance(row, int) and not isinstance(row, bool):
            reward += self.reward_spread * (row % SPREAD_PERIOD)
        if not self.rescore_bonus or row is None:
            return reward
        earlier = self.scored.get(row, 0)
        self.scored[row] = earlier + 1
        return reward + self.rescore_bonus * earlier


SPREAD_PERIOD: Final = 4
"""Rows ``_rowidx mod SPREAD_PERIOD`` apart score ``reward_spread`` apart (a group's members differ)."""
STATE_KEY: Final = web.AppKey("resources_state", ResourcesState)


def build_app(*, step_latency_ms: float = 0.0, step_item_latency_ms: float = 0.0) -> web.Application:
    """The resources server app."""
    app, writer = gym_app("resources", "resources")
    state = ResourcesState(initial=Latency(step_latency_ms, step_item_latency_ms))
    state.reset()
    app[STATE_KEY] = state
    app[WRITER_KEY] = writer
    app.router.add_post("/seed_session", seed_session)
    app.router.add_post("/calculator", calculator)
    app.router.add_post("/verify", verify)
    app.router.add_post("/step_batch", step_batch)
    app.router.add_post("/aggregate_metrics", aggregate_metrics)
    # Test-control routes: the loopback peer only.
    app.router.add_get("/_gym/state", loopback_only(show_state))
    app.router.add_post("/_gym/latency", loopback_only(set_latency))
    app.router.add_post("/_gym/reset", loopback_only(reset))
    app.router.add_post("/_gym/rescore", loopback_only(set_rescore))
    app.router.add_post("/_gym/spread", loopback_only(set_spread))
    return app


async def seed_session(request: web.Request) -> web.Response:
    """Start a session for one trajectory; its id travels in a cookie, as in NeMo Gym."""
    body = await json_object(request)
    session_id = uuid.uuid4().hex
    request.app[STATE_KEY].sessions[session_id] = {"row": body.get("_rowidx"), "tool_calls": 0}
    response = web.json_response({})
    response.set_cookie(SESSION_COOKIE, session_id)
    return response


async def calculator(request: web.Request) -> web.Response:
    """The calculator tool; a bad expression is a 400 whose text the agent passes to the model."""
    body = await json_object(request)
    session = request.app[STATE_KEY].sessions.get(request.cookies.get(SESSION_COOKIE, ""))
    if session is not None:
        session["tool_calls"] += 1
    try:
        result = tasks.evaluate(str(body.get("expression", "")))
    except tasks.TaskError as error:
        return web.json_response(str(error), status=400)
    return web.json_response(result)


async def verify(request: web.Request) -> web.Response:
    """Reward the trajectory: the request echoed back plus ``reward`` and ``failure_reason``."""
    body = await json_object(request)
    response = body.get("response")
    if not isinstance(response, Mapping):
        raise web.HTTPBadRequest(
            text='"/verify needs a \\"response\\" object (the Responses-API result of the trajectory)"',
            content_type="application/json",
        )
    try:
        verdict = tasks.verify_answer(body, tasks.final_text(response))
    except tasks.TaskError as error:
        raise web.HTTPBadRequest(text=f'"{error}"', content_type="application/json") from error
    reward = request.app[STATE_KEY].rescored(body.get("_rowidx"), verdict.reward)
    return web.json_response({**body, "reward": reward, "failure_reason": verdict.failure_reason})


async def step_batch(request: web.Request) -> web.Response:
    """``EnvironmentInterface.step`` for a whole batch in one call, with real environment cost."""
    body = await json_object(request)
    message_logs = body.get("message_logs")
    metadata = body.get("metadata")
    if not isinstance(message_logs, list) or not isinstance(metadata, list):
        raise web.HTTPBadRequest(
            text='"/step_batch needs \\"message_logs\\" (list of message lists) and \\"metadata\\" (list)"',
            content_type="application/json",
        )
    if len(message_logs) != len(metadata):
        raise web.HTTPBadRequest(
            text=f'"message_logs has {len(message_logs)} items but metadata has {len(metadata)}"',
            content_type="application/json",
        )
    state = request.app[STATE_KEY]
    state.step_batch_calls += 1
    names = [str(item.get("task")) if isinstance(item, Mapping) else "?" for item in metadata]
    turns = [_model_turns(log) for log in message_logs]
    rows = [item.get("_rowidx") if isinstance(item, Mapping) else None for item in metadata]
    # the text each item's last model turn hands the environment (``conversation_carried``)
    answered = [_last_answer(log) for log in message_logs]
    request.app[WRITER_KEY].emit(
        "info",
        "step_batch",
        {"batch_size": len(metadata), "tasks": names, "turns": turns, "rows": rows, "answers": answered},
    )
    await asyncio.sleep(state.latency.seconds_for(len(metadata)))
    try:
        results = [tasks.step_one(log, meta) for log, meta in zip(message_logs, metadata, strict=True)]
    except (tasks.TaskError, AttributeError, TypeError) as error:
        raise web.HTTPBadRequest(
            text=f'"bad step_batch item: {error}"', content_type="application/json"
        ) from error
    rewards = [state.rescored(row, result["reward"]) for row, result in zip(rows, results, strict=True)]
    # what the environment answered each row (``rewards_recorded`` holds native rewards to it), and
    # the observation a row that goes on must carry into its next model call
    request.app[WRITER_KEY].emit(
        "ok",
        "step_batch_rewards",
        {
            "rows": rows,
            "rewards": rewards,
            "observations": [text_fingerprint(result["observation"].get("content")) for result in results],
            "terminateds": [bool(result["terminated"]) for result in results],
        },
    )
    return web.json_response(
        {
            "observations": [result["observation"] for result in results],
            "metadata": [result["metadata"] for result in results],
            "next_stop_strings": [result["next_stop_strings"] for result in results],
            "rewards": rewards,
            "terminateds": [result["terminated"] for result in results],
            "answers": [result["answer"] for result in results],
        }
    )


def _model_turns(message_log: object) -> int | None:
    """How many model turns a sample's message log holds: its assistant messages."""
    if not isinstance(message_log, list):
        return None
    return sum(1 for item in message_log if isinstance(item, Mapping) and item.get("role") == "assistant")


def _last_answer(message_log: object) -> str | None:
    """The fingerprinted text of a message log's last assistant message; None when it has none."""
    if not isinstance(message_log, list):
        return None
    answers = [item for item in message_log if isinstance(item, Mapping) and item.get("role") == "assistant"]
    return text_fingerprint(answers[-1].get("content")) if answers else None


async def aggregate_metrics(request: web.Request) -> web.Response:
    """NeMo Gym's metrics endpoint: mean reward over the verify responses posted."""
    body = await json_object(request)
    responses = body.get("verify_responses") or []
    rewards = [float(item.get("reward", 0.0)) for item in responses if isinstance(item, Mapping)]
    return web.json_response({"mean_reward": sum(rewards) / len(rewards) if rewards else None})


async def show_state(request: web.Request) -> web.Response:
    """Test-side view of the state (sessions, latency, step_batch calls)."""
    state = request.app[STATE_KEY]
    return web.json_response(
        {
            "sessions": len(state.sessions),
            "step_batch_calls": state.step_batch_calls,
            "latency": {"per_call_ms": state.latency.per_call_ms, "per_item_ms": state.latency.per_item_ms},
        }
    )


async def set_latency(request: web.Request) -> web.Response:
    """Change the ``/step_batch`` cost at run time (the ``slow_env`` fault uses this)."""
    body = await json_object(request)
    state = request.app[STATE_KEY]
    try:
        per_call = float(body.get("per_call_ms", state.latency.per_call_ms))
        per_item = float(body.get("per_item_ms", state.latency.per_item_ms))
    except (TypeError, ValueError) as error:
        raise web.HTTPBadRequest(
            text=f'"latency must be numbers: {error}"', content_type="application/json"
        ) from error
    if per_call < 0 or per_item < 0:
        raise web.HTTPBadRequest(text='"latency must be >= 0 ms"', content_type="application/json")
    state.latency = Latency(per_call, per_item)
    return web.json_response({"per_call_ms": per_call, "per_item_ms": per_item})


async def set_rescore(request: web.Request) -> web.Response:
    """Score each row ``bonus`` higher every time it is scored again, until the next reset."""
    body = await json_object(request)
    bonus = body.get("bonus")
    if not isinstance(bonus, int | float) or isinstance(bonus, bool):
        raise web.HTTPBadRequest(
            text=f'"bonus must be a number, got {bonus!r}"', content_type="application/json"
        )
    state = request.app[STATE_KEY]
    state.rescore_bonus = float(bonus)
    state.scored.clear()
    return web.json_response({"rescore_bonus": state.rescore_bonus})


async def set_spread(request: web.Request) -> web.Response:
    """Score each row ``spread`` times ``_rowidx mod 4`` higher, until the next reset."""
    body = await json_object(request)
    spread = body.get("spread")
    if not isinstance(spread, int | float) or isinstance(spread, bool) or spread < 0:
        raise web.HTTPBadRequest(
            text=f'"spread must be a number >= 0, got {spread!r}"', content_type="application/json"
        )
    state = request.app[STATE_KEY]
    state.reward_spread = float(spread)
    return web.json_response({"reward_spread": state.reward_spread})


async def reset(request: web.Request) -> web.Response:
    """Forget sessions and restore the start latency: the per-test reset."""
    request.app[STATE_KEY].reset()
    return web.json_response({})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pytest_rollout_chaos.servers.gym.resources")
    parser.add_argument("--step-latency-ms", type=float, default=0.0, help="Cost of each /step_batch call")
    parser.add_argument("--step-item-latency-ms", type=float, default=0.0, help="Extra cost per batch item")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    if args.step_latency_ms < 0 or args.step_item_latency_ms < 0:
        parser.error("latencies must be >= 0 ms")
    serve.serve(
        build_app(step_latency_ms=args.step_latency_ms, step_item_latency_ms=args.step_item_latency_ms),
        port=args.port,
    )


if __name__ == "__main__":
    main()
