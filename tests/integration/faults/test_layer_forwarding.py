"""The fault layer as a reverse proxy, against real processes: faithful forwarding, cut connections,
cancellation, recording, rows tied by prompt, and rewrites of real answers.

Some upstreams are small aiohttp servers written here, served on the test's own loop behind a
fault layer process of this module, so a test can see exactly what reached the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import AsyncIterator
from typing import Any, Final

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from pytest_rollout_chaos.history import Event, History, fingerprint, text_fingerprint
from pytest_rollout_chaos.servers.faultlayer import client as layer
from pytest_rollout_chaos.servers.faultlayer.client import LayerControl
from tests.faults._hooked import Hooked, hook_hits, wait_for
from tests.integration.faults._layer_rig import (
    Layer,
    Upstream,
    client_session,
    closed_port,
    link_to,
    serving,
    upstream_behind,
    within,
)

# -- forwarding ------------------------------------------------------------------------------------

RAW_TARGET: Final = "/v1/odd%20path/item%2Fone?b=2&a=1&a=%26x&empty="
REQUEST_BODY: Final = b'{"z": 1,   "a": [1, 2], "text": "keep my   spacing"}'
ANSWER_BODY: Final = b'{"answer" :  [3, 2, 1]}'


@pytest.mark.asyncio
async def test_method_path_query_headers_body_and_cookies_pass_through_untouched(
    fault_layer: Layer,
) -> None:
    seen: dict[str, Any] = {}

    async def record(request: web.Request) -> web.StreamResponse:
        seen.update(
            method=request.method,
            target=request.raw_path,
            headers=request.headers.copy(),
            cookies=dict(request.cookies),
            body=await request.read(),
        )
        response = web.Response(status=201, body=ANSWER_BODY, content_type="application/json")
        response.headers["X-Answer"] = "yes"
        response.set_cookie("session_id", "s-42", path="/", httponly=True)
        response.set_cookie("theme", "dark")
        return response

    headers: CIMultiDict[str] = CIMultiDict(
        [
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer token-1"),
            ("X-Multi", "first"),
            ("X-Multi", "second"),
            ("Cookie", "session_id=abc; lang=en"),
        ]
    )
    async with upstream_behind(fault_layer, {"/{tail:.*}": record}) as upstream, client_session() as session:
        url = URL(f"{upstream.url}{RAW_TARGET}", encoded=True)
        async with session.request("PATCH", url, headers=headers, data=REQUEST_BODY) as response:
            status, answer_headers, answer = response.status, response.headers.copy(), await response.read()
    assert seen["method"] == "PATCH"
    assert seen["target"] == RAW_TARGET
    assert seen["body"] == REQUEST_BODY, "the body is forwarded as sent, not re-encoded"
    assert seen["headers"].getall("X-Multi") == ["first", "second"]
    assert seen["headers"]["Authorization"] == "Bearer token-1"
    assert seen["headers"]["Content-Type"] == "application/json"
    assert seen["cookies"] == {"session_id": "abc", "lang": "en"}
    assert (status, answer) == (201, ANSWER_BODY)
    assert answer_headers["X-Answer"] == "yes"
    set_cookies = answer_headers.getall("Set-Cookie")
    assert len(set_cookies) == 2, set_cookies
    assert any(cookie.startswith("session_id=s-42;") and "HttpOnly" in cookie for cookie in set_cookies)
    assert any(cookie.startswith("theme=dark") for cookie in set_cookies)


# -- cut connections and cancellation --------------------------------------------------------------


async def _drop(request: web.Request) -> web.StreamResponse:
    assert request.transport is not None
    request.transport.abort()  # the connection ends before any answer
    raise asyncio.CancelledError


@contextlib.asynccontextmanager
async def _dead_upstream(fault_layer: Layer, how: str) -> AsyncIterator[Upstream]:
    if how == "dropped":
        async with upstream_behind(fault_layer, {"/{tail:.*}": _drop}) as upstream:
            yield upstream
        return
    yield link_to(fault_layer, closed_port())


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["refused", "dropped"])
async def test_an_upstream_that_is_down_drops_the_clients_connection(fault_layer: Layer, how: str) -> None:
    history = fault_layer.history()
    async with _dead_upstream(fault_layer, how) as upstream, client_session() as session:
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            async with session.post(f"{upstream.url}/run", json={"_rowidx": 0}) as response:
                pytest.fail(f"expected a dropped connection, got {response.status}: {await response.text()}")
    cut = wait_for(history, lambda event: event.source == upstream.server and event.kind == "info")
    assert len(cut) == 1, history.timeline()
    assert cut[0].op == "POST /run"
    assert upstream.server in cut[0].data["error"], cut[0].data
    assert cut[0].data.get("row") == 0, cut[0].data
    answered = [event for event in history.events(source=upstream.server) if event.kind in ("ok", "fail")]
    assert answered == [], "a cut connection is not an answer"


@pytest.mark.asyncio
async def test_a_client_that_gives_up_cancels_the_upstream_request(fault_layer: Layer) -> None:
    started, cancelled, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def slow(_request: web.Request) -> web.StreamResponse:
        started.set()
        try:
            await asyncio.wait_for(release.wait(), timeout=60.0)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return web.json_response({"late": True})

    async def ask(session: aiohttp.ClientSession, url: str) -> None:
        async with session.post(url, json={}) as response:
            await response.read()

    history = fault_layer.history()
    async with upstream_behind(fault_layer, {"/slow": slow}) as upstream, client_session() as session:
        request = asyncio.create_task(ask(session, f"{upstream.url}/slow"))
        try:
            await within(started, "the request reaches the server through the layer")
            request.cancel()  # the client gives up, as when its own deadline passes
            with pytest.raises(asyncio.CancelledError):
                await request
            await within(cancelled, "the server's handler is cancelled once the client has given up")
        finally:
            request.cancel()
            release.set()
    gone = wait_for(history, lambda event: event.source == upstream.server and event.kind == "info")
    assert [event.data["error"] for event in gone] == ["the client closed the connection"]


# -- recording -------------------------------------------------------------------------------------


def _by_request(history: History, source: str) -> dict[str, list[Event]]:
    grouped: dict[str, list[Event]] = {}
    for event in history.events(source=source):
        if event.op != "hook" and event.request_id is not None:
            grouped.setdefault(event.request_id, []).append(event)
    return grouped


@pytest.mark.asyncio
async def test_every_request_is_recorded_with_link_server_row_status_and_latency(hooked: Hooked) -> None:
    layer.reset(hooked.layer.url)
    _, history = hooked.context()
    async with client_session() as session:
        sent = [
            ("POST", "/run", {"_rowidx": 7}, "id-run"),
            ("POST", "/v1/chat/completions", {"messages": [{"role": "tool", "content": "42"}]}, "id-chat"),
            ("GET", "/health", None, "id-health"),
            ("POST", "/no/such/route", {}, "id-missing"),
        ]
        statuses = {}
        for method, path, body, request_id in sent:
            async with session.request(
                method, f"{hooked.url}{path}", json=body, headers={"X-Request-Id": request_id}
            ) as response:
                statuses[request_id] = response.status
    assert statuses == {"id-run": 200, "id-chat": 200, "id-health": 200, "id-missing": 404}
    recorded = _by_request(history, "hooked")
    assert sorted(recorded) == sorted(statuses), history.timeline()
    for method, path, _, request_id in sent:
        invoke, done = recorded[request_id]
        expected_kind = "ok" if statuses[request_id] < 400 else "fail"
        assert (invoke.kind, done.kind) == ("invoke", expected_kind), request_id
        assert invoke.op == done.op == f"{method} {path}"
        for event in (invoke, done):
            assert (event.data["link"], event.data["server"]) == ("client->hooked", "hooked")
            assert event.data.get("row") == (7 if path == "/run" else None), event
        assert done.data["status"] == statuses[request_id]
        if request_id == "id-chat":  # why the policy stopped each generation of its answer, its text
            assert done.data["finishes"] == ["length"], done
            assert done.data["texts"] == [text_fingerprint("abc")], done
            assert invoke.data["last_message"] == text_fingerprint("42"), invoke  # what it was asked
        else:
            assert "last_message" not in invoke.data
            assert "texts" not in done.data
        if request_id == "id-missing":  # the start of an error answer's body, a client's cause
            assert "Not Found" in done.data["body"], done
        latency_ms = done.data["latency_ms"]
        assert isinstance(latency_ms, float | int)
        assert latency_ms >= 0


# What NeMo Gym's agent passes on when the policy gave it a NaN logprob: Python's json writes the
# bare literals, which strict decoders (orjson, the layer's fast path) refuse.
NAN_RUN_RESULT: Final = (
    b'{"_rowidx": 3, "reward": 0.0, "response": {"output": [{"type": "message",'
    b' "generation_token_ids": [5, 6, 2], "generation_log_probs": [-0.5, NaN, -Infinity],'
    b' "prompt_token_ids": [1, 2, 3]}]}}'
)


async def _nan_run(request: web.Request) -> web.StreamResponse:
    await request.read()
    return web.Response(body=NAN_RUN_RESULT, content_type="application/json")


@pytest.mark.asyncio
async def test_an_answer_with_nan_logprobs_is_recorded_whole(fault_layer: Layer) -> None:
    history = fault_layer.history()
    async with (
        upstream_behind(fault_layer, {"/run": _nan_run}) as upstream,
        client_session() as session,
        session.post(f"{upstream.url}/run", json={"_rowidx": 3}) as response,
    ):
        status, body = response.status, await response.read()
    assert (status, body) == (200, NAN_RUN_RESULT), "passed on untouched"
    [ok] = wait_for(history, lambda event: event.source == upstream.server and event.kind == "ok")
    assert ok.data.get("generations") == [fingerprint([5, 6, 2])], ok
    assert ok.data.get("logprobs") == ["3:x1"], "the digest names the first logprob that is no number"
    assert (ok.data.get("row"), ok.data.get("reward"), ok.data.get("prompts")) == (
        3,
        0.0,
        [fingerprint([1, 2, 3])],
    )


async def _echo(request: web.Request) -> web.StreamResponse:
    return web.json_response(await request.json())


@pytest.mark.asyncio
async def test_a_collectors_run_is_recorded_with_what_it_asks_for(fault_layer: Layer) -> None:
    history = fault_layer.history()
    params = {
        "input": [{"role": "user", "content": "What is 2 + 2?"}],
        "tools": [{"type": "function", "name": "calculator"}],
        "temperature": 0.7,
        "max_output_tokens": 64,
        "seed": 3,
    }
    body = {"_rowidx": 4, "responses_create_params": params, "agent_ref": {"name": "a"}}
    async with serving({"/{tail:.*}": _echo}) as port, client_session() as session:
        collector = layer.add_link(
            fault_layer.process.url,
            name="collector->asked",
            server="asked",
            source="asked",
            upstream=f"http://127.0.0.1:{port}",
        )
        other = link_to(fault_layer, port)
        for url in (f"http://{collector}", other.url):
            async with session.post(f"{url}/run", json=body) as response:
                assert response.status == 200
    invokes = [event for event in history.events(kind="invoke") if event.op == "POST /run"]
    [mine] = [event for event in invokes if event.source == "asked"]
    assert mine.data["sampling"] == {"temperature": 0.7, "max_output_tokens": 64}, "a seed picks a draw only"
    assert sorted(mine.data["prompt"]) == ["input", "tools"]
    assert mine.data["prompt"]["input"].startswith("1:")
    [theirs] = [event for event in invokes if event.source == other.server]
    assert "sampling" not in theirs.data, "only what the collector sends is recorded so"


# -- rows tied by prompt ---------------------------------------------------------------------------

PROMPTS: Final = ["What is seventeen plus twenty-five?", "Name three prime numbers below twenty."]
ROWS: Final = [
    {"_rowidx": index, "responses_create_params": {"input": [{"role": "user", "content": prompt}]}}
    for index, prompt in enumerate(PROMPTS)
]


def _chat_for(prompt: str) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}],
    }


@pytest.mark.asyncio
async def test_a_row_rule_fires_on_the_request_carrying_that_rows_prompt(hooked: Hooked) -> None:
    layer.reset(hooked.layer.url)
    _, history = hooked.context()
    async with LayerControl(hooked.layer.url) as control:
        assert await control.register_rows(ROWS) == 2
        rule = await control.arm("hooked", "http_error", match={"row": 1, "route": "/v1/chat/completions"})
        row0 = (await hooked.post("/v1/chat/completions", _chat_for(PROMPTS[0])))[0]
        unrelated = (await hooked.post("/v1/chat/completions", _chat_for("Tell me about the weather.")))[0]
        row1 = (await hooked.post("/v1/chat/completions", _chat_for(PROMPTS[1])))[0]
        (listed,) = await control.rules()
        await control.clear()
    assert (row0, unrelated, row1) == (200, 200, 500)
    assert (listed["candidates"], listed["hits"]) == (1, 1), "only row 1's request was a candidate"
    assert [(hit["rule"], hit["row"]) for hit in hook_hits(history, "http_error")] == [(rule, 1)]
    invokes = [event.data.get("row") for event in history.events(source="hooked", kind="invoke")]
    assert invokes == [0, None, 1], "the History ties each request to its row too"


@pytest.mark.asyncio
async def test_a_turn_sent_as_two_requests_belongs_to_one_row(hooked: Hooked) -> None:
    layer.reset(hooked.layer.url)
    shared = [{**row, "responses_create_params": ROWS[0]["responses_create_params"]} for row in ROWS]
    async with LayerControl(hooked.layer.url) as control:
        assert await control.register_rows(shared) == 2
        await control.arm("hooked", "http_error", match={"row": 1, "route": "/v1/completions"})
        statuses = [
            (await hooked.post(path, _chat_for(PROMPTS[0])))[0]
            # row 0's turn, then row 1's: each a chat completion, then a second call with the
            # same messages (as a /tokenize follows a chat completion)
            for _ in range(2)
            for path in ("/v1/chat/completions", "/v1/completions")
        ]
        await control.clear()
    assert statuses == [200, 200, 200, 500], "the second call of row 0's turn is row 0's"


# -- rewrites of real answers ----------------------------------------------------------------------

TOKENS: Final = [151644, 872, 198, 3838, 374, 220, 16, 10, 16, 30, 151645]


async def _tokenize(request: web.Request) -> web.StreamResponse:
    await request.read()
    return web.json_response(
        {"count": len(TOKENS), "max_model_len": 4096, "tokens": TOKENS, "token_strs": None}
    )


async def _plain_text(_request: web.Request) -> web.StreamResponse:
    return web.Response(text='{"token_logprobs": [-0.5]}', content_type="text/plain")


@pytest.mark.asyncio
async def test_prefix_drift_changes_one_id_of_a_tokenize_answer(fault_layer: Layer) -> None:
    history = fault_layer.history()
    routes = {"/tokenize": _tokenize}
    async with (
        upstream_behind(fault_layer, routes) as upstream,
        LayerControl(fault_layer.process.url) as control,
        client_session() as session,
    ):
        await control.arm(upstream.server, "prefix_drift", match={"route": "/tokenize"})
        async with session.post(f"{upstream.url}/tokenize", json={"model": "m", "prompt": "x"}) as response:
            drifted = (await response.json())["tokens"]
        await control.clear()
        async with session.post(f"{upstream.url}/tokenize", json={"model": "m", "prompt": "x"}) as response:
            healed = (await response.json())["tokens"]
    assert len(drifted) == len(TOKENS)
    changed = [index for index, (a, b) in enumerate(zip(TOKENS, drifted, strict=True)) if a != b]
    assert len(changed) == 1, drifted
    assert healed == TOKENS
    (hit,) = [hit for hit in hook_hits(history, "prefix_drift") if hit["server"] == upstream.server]
    assert (hit["changed"], hit["mode"], hit["route"]) == (1, "replace", "/tokenize")


@pytest.mark.asyncio
async def test_a_rewrite_leaves_a_non_json_answer_alone_and_says_so(fault_layer: Layer) -> None:
    history = fault_layer.history()
    async with (
        upstream_behind(fault_layer, {"/text": _plain_text}) as upstream,
        LayerControl(fault_layer.process.url) as control,
        client_session() as session,
    ):
        await control.arm(upstream.server, "nan_logprobs", match={"route": "/text"})
        async with session.post(f"{upstream.url}/text") as response:
            body = await response.read()
        await control.clear()
    assert body == b'{"token_logprobs": [-0.5]}'
    (hit,) = [hit for hit in hook_hits(history, "nan_logprobs") if hit["server"] == upstream.server]
    assert (hit["skipped"], hit["changed"]) == ("response is not JSON", 0)


@pytest.mark.asyncio
async def test_nan_logprobs_on_a_chat_answer_with_token_id_tokens(hooked: Hooked) -> None:
    layer.reset(hooked.layer.url)
    _, history = hooked.context()
    async with LayerControl(hooked.layer.url) as control:
        await control.arm("hooked", "nan_logprobs", match={"route": "/v1/chat/completions"}, token_index=1)
        status, body = await hooked.post("/v1/chat/completions", {"messages": []})
        await control.clear()
    assert status == 200
    content = json.loads(body)["choices"][0]["logprobs"]["content"]
    assert [item["token"] for item in content] == ["token_id:100", "token_id:101", "token_id:102"]
    logprobs = [item["logprob"] for item in content]
    assert logprobs[0] == -0.5
    assert math.isnan(logprobs[1])
    assert logprobs[2] == -0.125
    (hit,) = hook_hits(history, "nan_logprobs")
    assert (hit["shape"], hit["changed"], hit["route"]) == ("nan", 1, "/v1/chat/completions")
