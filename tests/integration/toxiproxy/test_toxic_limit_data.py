"""limit_data: the connection is closed after exactly `bytes` bytes in that direction."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web

from pytest_rollout_chaos.servers.toxiproxy.client import ToxiproxyClient
from tests.integration.toxiproxy._toxiproxy_testlib import Rig


@pytest.mark.asyncio
async def test_limit_data_truncates_at_the_byte_count(blast_rig: Rig) -> None:
    await blast_rig.api.add_toxic(blast_rig.proxy.name, type="limit_data", attributes={"bytes": 100})
    client = await blast_rig.connect()
    client.writer.write(b"1000\n")
    data = await client.read_all()
    client.close()
    assert data == (bytes(range(256)) * 4)[:100]


@pytest.mark.asyncio
async def test_limit_data_truncates_a_real_http_response(api: ToxiproxyClient) -> None:
    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 10_000)

    app = web.Application()
    app.router.add_get("/big", big)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        proxy = await api.create_proxy("http-limit", upstream=f"127.0.0.1:{port}")
        await api.add_toxic(proxy.name, type="limit_data", attributes={"bytes": 2000})
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientPayloadError):
                async with session.get(f"http://{proxy.listen_host}:{proxy.listen_port}/big") as response:
                    await response.read()
    finally:
        await runner.cleanup()
