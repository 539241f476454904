"""The client's data and its deadlines: a hung or absent API is an error, never a hang."""

from __future__ import annotations

import asyncio
import time

import pytest

from pytest_rollout_chaos.servers.toxiproxy.client import (
    ProxyInfo,
    ToxicInfo,
    ToxiproxyClient,
    ToxiproxyError,
)
from pytest_rollout_chaos.servers.toxiproxy.proxy import join_address, split_address


def test_proxy_info_parses_the_server_json() -> None:
    info = ProxyInfo.from_json(
        {
            "name": "llm",
            "listen": "127.0.0.1:40001",
            "upstream": "127.0.0.1:8000",
            "enabled": True,
            "toxics": [
                {"name": "t", "type": "latency", "stream": "upstream", "toxicity": 1, "attributes": {}}
            ],
        }
    )
    assert (info.listen_host, info.listen_port) == ("127.0.0.1", 40001)
    assert info.toxics == (ToxicInfo("t", "latency", "upstream", 1.0, {}),)


@pytest.mark.parametrize(
    ("listen", "host", "port"),
    [
        ("[::1]:9000", "::1", 9000),
        ("[::]:9000", "127.0.0.1", 9000),
        ("0.0.0.0:1", "127.0.0.1", 1),
        (":5", "127.0.0.1", 5),
    ],
)
def test_listen_host_and_port(listen: str, host: str, port: int) -> None:
    info = ProxyInfo("p", listen, "u:1", True)
    assert (info.listen_host, info.listen_port) == (host, port)


def test_addresses_round_trip_and_bad_ones_say_what_is_valid() -> None:
    assert split_address(join_address("::1", 80)) == ("::1", 80)
    assert split_address("localhost:0") == ("localhost", 0)
    with pytest.raises(Exception, match=r"invalid address 'nope' \(valid: HOST:PORT"):
        split_address("nope")


@pytest.mark.asyncio
async def test_a_hung_api_times_out_with_a_clear_error() -> None:
    writers: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)  # accept, never answer

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with ToxiproxyClient(f"http://127.0.0.1:{port}", timeout_s=0.3) as client:
            start = time.monotonic()
            with pytest.raises(ToxiproxyError, match=r"no answer within 0.3s") as error:
                await client.version()
            assert time.monotonic() - start < 1.0
            assert error.value.status is None
    finally:
        for writer in writers:
            writer.transport.abort()
        server.close()
        await server.wait_closed()
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_an_absent_api_is_an_error() -> None:
    async with ToxiproxyClient("http://127.0.0.1:1", timeout_s=2.0) as client:
        with pytest.raises(ToxiproxyError, match="cannot reach the API"):
            await client.proxies()
