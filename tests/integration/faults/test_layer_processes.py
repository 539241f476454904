"""The fault layer as several processes: the same decisions and the same record as one process.

Every request here opens its own connection, so the kernel spreads them over the layer's
processes (``SO_REUSEPORT``); each test checks that both processes served some, or it would
prove nothing about the second.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import aiohttp
import pytest
from aiohttp import web

from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers import procfs
from pytest_rollout_chaos.servers.faultlayer import client as layer
from pytest_rollout_chaos.servers.faultlayer.client import LayerControl
from pytest_rollout_chaos.servers.faultlayer.spec import events_files, fault_layer_spec
from pytest_rollout_chaos.servers.process import ManagedProcess
from tests.integration.faults._layer_rig import WAIT_S, Layer, Upstream, upstream_behind

PROCESSES: Final = 2
REQUESTS: Final = 24
HELD: Final = 12  # requests held at once by a hang


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layer]:
    """A fault layer of two processes (its main events file: ``Layer.events_file``)."""
    directory = tmp_path_factory.mktemp("layer2")
    events_file = directory / "layer.events.jsonl"
    spec = fault_layer_spec(events_file, name="test-layer-2", processes=PROCESSES)
    process = ManagedProcess(spec, directory / "logs")
    process.start()
    try:
        yield Layer(process, events_file)
    finally:
        process.stop()


def _files(two: Layer) -> tuple[Path, ...]:
    return events_files(two.events_file, PROCESSES)


def _history(two: Layer) -> History:
    """A History following every events file of the layer, from now."""
    history = History()
    for path in _files(two):
        history.follow(path)
    return history


async def _ask(upstream: Upstream, path: str, body: dict[str, object], cookie: str = "") -> int:
    """One request on a connection of its own; its status."""
    headers = {"Cookie": cookie} if cookie else {}
    async with (
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(force_close=True),  # a new connection: any process may take it
            timeout=aiohttp.ClientTimeout(total=WAIT_S),
            cookie_jar=aiohttp.DummyCookieJar(),
        ) as session,
        session.post(f"{upstream.url}{path}", json=body, headers=headers) as response,
    ):
        await response.read()
        return response.status


def _pids_of(history: History, server: str) -> set[str]:
    """The layer processes that recorded a request of ``server`` (from its request ids)."""
    invokes = history.events(kind="invoke")
    return {(event.request_id or "").split("-")[-2] for event in invokes if event.source == server}


async def _ok(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    response = web.json_response({"echo": body}, status=500 if body.get("fail") else 200)
    if request.path == "/seed_session":
        response.set_cookie("session_id", f"s-{body['_rowidx']}")
    return response


@pytest.mark.asyncio
async def test_every_request_through_two_processes_is_recorded_once(
    two: Layer,
) -> None:
    history = _history(two)
    async with upstream_behind(two, {"/{tail:.*}": _ok}) as upstream:
        statuses = await asyncio.gather(*(_ask(upstream, "/echo", {"n": n}) for n in range(REQUESTS)))
    assert statuses == [200] * REQUESTS
    invokes = [event for event in history.events(kind="invoke") if event.source == upstream.server]
    oks = [event for event in history.events(kind="ok") if event.source == upstream.server]
    assert len(invokes) == len(oks) == REQUESTS
    assert len({event.request_id for event in invokes}) == REQUESTS
    assert {event.request_id for event in oks} == {event.request_id for event in invokes}
    assert len(_pids_of(history, upstream.server)) == PROCESSES, "both processes served requests"
    assert all(path.stat().st_size > 0 for path in _files(two)), "each process records into its own file"


@pytest.mark.asyncio
async def test_a_counted_rule_fires_across_processes_exactly_as_in_one(
    two: Layer,
) -> None:
    history = _history(two)
    async with (
        upstream_behind(two, {"/{tail:.*}": _ok}) as upstream,
        LayerControl(two.process.url) as control,
    ):
        match = {"route": "/run", "nth": 2, "every": 3, "count": 5}
        rule = await control.arm(upstream.server, "http_error", match=match, status=504)
        statuses = [await _ask(upstream, "/run", {"_rowidx": n}) for n in range(REQUESTS)]
        (listed,) = await control.rules()
        await control.clear()
    expected = [504 if n in {1, 4, 7, 10, 13} else 200 for n in range(REQUESTS)]
    assert statuses == expected
    assert (listed["id"], listed["candidates"], listed["hits"]) == (rule, REQUESTS, 5)
    hooks = [event.data for event in history.events(kind="info") if event.op == "hook"]
    assert sorted(hook["row"] for hook in hooks) == [1, 4, 7, 10, 13]
    assert len(_pids_of(history, upstream.server)) == PROCESSES, "both processes served requests"


@pytest.mark.asyncio
async def test_a_row_learnt_in_one_process_is_known_in_the_other(
    two: Layer,
) -> None:
    history = _history(two)
    async with upstream_behind(two, {"/{tail:.*}": _ok}) as upstream:
        for row in range(REQUESTS // 2):
            await _ask(upstream, "/seed_session", {"_rowidx": row})
            # no _rowidx: only the cookie the answer above set ties it to its row
            await _ask(upstream, "/verify", {"answer": 42}, cookie=f"session_id=s-{row}")
    verified = [
        event.data.get("row")
        for event in history.events(kind="invoke")
        if event.source == upstream.server and event.op == "POST /verify"
    ]
    assert verified == list(range(REQUESTS // 2))
    assert len(_pids_of(history, upstream.server)) == PROCESSES, "both processes served requests"
    layer.reset(two.process.url)


@pytest.mark.asyncio
async def test_a_hang_held_in_either_process_is_released_by_disarming(two: Layer) -> None:
    history = _history(two)
    async with (
        upstream_behind(two, {"/{tail:.*}": _ok}) as upstream,
        LayerControl(two.process.url) as control,
    ):
        rule = await control.arm(upstream.server, "hang", match={"route": "/run"})
        asking = [asyncio.ensure_future(_ask(upstream, "/run", {"n": n})) for n in range(HELD)]
        try:
            async with asyncio.timeout(WAIT_S):
                while len([e for e in history.events(kind="info") if e.op == "hook"]) < HELD:
                    await asyncio.sleep(0.02)
            assert not any(task.done() for task in asking), "a hang holds the request until disarmed"
            assert await control.disarm(rule)
            async with asyncio.timeout(WAIT_S):
                statuses = await asyncio.gather(*asking)
        finally:
            for task in asking:
                task.cancel()
    assert statuses == [200] * HELD
    assert len(_pids_of(history, upstream.server)) == PROCESSES, "both processes held requests"


@pytest.mark.asyncio
async def test_a_prompt_learnt_from_a_request_ties_the_next_one_in_any_process(two: Layer) -> None:
    """A ``_rowidx`` request ends the quiet state in which the workers decide alone: the request
    after it, on whichever process, is tied to its row, even when the first one's answer failed
    (it teaches nothing: the request itself did). Each row starts quiet (a reset), so each is
    a trial of the first request on one process and the next on the other."""
    history = _history(two)
    async with upstream_behind(two, {"/{tail:.*}": _ok}) as upstream:
        for row in range(REQUESTS):
            layer.reset(two.process.url)
            prompt = f"What is {row} plus {row}, exactly?"
            run = {
                "_rowidx": row,
                "responses_create_params": {"input": [{"role": "user", "content": prompt}]},
                "fail": True,
            }
            assert await _ask(upstream, "/run", run) == 500
            await _ask(upstream, "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}]})
    chats = [
        event.data.get("row")
        for event in history.events(kind="invoke")
        if event.source == upstream.server and event.op == "POST /v1/chat/completions"
    ]
    assert chats == list(range(REQUESTS))
    assert len(_pids_of(history, upstream.server)) == PROCESSES, "both processes served requests"
    layer.reset(two.process.url)


def _generation(n: int) -> list[int]:
    return [1000 + n, 2000 + n, 3000 + n, 4000 + n]


async def _generate(request: web.Request) -> web.StreamResponse:
    n = (await request.json())["n"]
    return web.json_response({"choices": [{"token_ids": _generation(n)}]})


async def _tokenize(request: web.Request) -> web.StreamResponse:
    n = (await request.json())["n"]
    return web.json_response({"tokens": [1, 2, 3, *_generation(n), 5, 6, 7, 8, 9, 10, 11, 12]})


@pytest.mark.asyncio
async def test_prefix_drift_remembers_the_generations_every_process_saw(two: Layer) -> None:
    """Each generation is answered by either process; the drift lands inside it (index 5) only if
    the rule remembered it, else in the middle of the prompt (index 7)."""
    layer.reset(two.process.url)
    history = _history(two)
    routes = {"/v1/chat/completions": _generate, "/tokenize": _tokenize}
    changed: list[list[int]] = []
    async with upstream_behind(two, routes) as upstream, LayerControl(two.process.url) as control:
        await control.arm(upstream.server, "prefix_drift", match={"route": "/*"})
        for n in range(REQUESTS):
            await _ask(upstream, "/v1/chat/completions", {"n": n})
            async with (
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session,
                session.post(f"{upstream.url}/tokenize", json={"n": n}) as response,
            ):
                tokens = (await response.json())["tokens"]
            original = [1, 2, 3, *_generation(n), 5, 6, 7, 8, 9, 10, 11, 12]
            changed.append(
                [index for index, (a, b) in enumerate(zip(original, tokens, strict=True)) if a != b]
            )
        await control.clear()
    assert changed == [[5]] * REQUESTS
    assert len(_pids_of(history, upstream.server)) == PROCESSES, "both processes served requests"


@pytest.mark.parametrize("how", ["stopped", "main killed"])
def test_no_worker_outlives_the_layer(tmp_path: Path, how: str) -> None:
    """Stopped as the supervisor stops it, or its main process SIGKILLed alone: the worker goes."""
    spec = fault_layer_spec(tmp_path / "layer.events.jsonl", name="test-layer-gone", processes=PROCESSES)
    process = ManagedProcess(spec, tmp_path / "logs")
    process.start()
    try:
        workers = procfs.descendant_pids(process.pid)
        assert len(workers) == PROCESSES - 1, workers
        if how == "main killed":
            os.kill(process.pid, signal.SIGKILL)
        else:
            process.stop()
        deadline = time.monotonic() + WAIT_S
        while any(procfs.alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(procfs.alive(pid) for pid in workers), f"worker left after the layer was {how}"
    finally:
        process.stop()
