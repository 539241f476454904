"""The REST API: routes, JSON shapes and status codes as Toxiproxy 2.x has them."""

from __future__ import annotations

import aiohttp
import pytest

from pytest_rollout_chaos.servers.toxiproxy.client import ToxiproxyClient, ToxiproxyError
from tests.integration.toxiproxy._toxiproxy_testlib import Rig, TcpTarget, echo


@pytest.mark.asyncio
async def test_version_answers(api: ToxiproxyClient) -> None:
    assert (await api.version()).startswith("2.")


@pytest.mark.asyncio
async def test_create_reports_the_real_port_and_lists_the_proxy(echo_rig: Rig) -> None:
    proxy = echo_rig.proxy
    assert proxy.listen_host == "127.0.0.1"
    assert proxy.listen_port > 0
    assert proxy.upstream == echo_rig.target.address
    assert proxy.enabled
    assert proxy.toxics == ()
    assert (await echo_rig.api.proxies())[proxy.name] == proxy
    assert await echo_rig.api.proxy(proxy.name) == proxy


@pytest.mark.asyncio
async def test_proxy_errors_carry_error_and_status(echo_rig: Rig) -> None:
    api = echo_rig.api
    with pytest.raises(ToxiproxyError) as exists:
        await api.create_proxy(echo_rig.proxy.name, upstream=echo_rig.target.address)
    assert exists.value.status == 409
    assert exists.value.error.startswith("proxy already exists")
    with pytest.raises(ToxiproxyError) as missing:
        await api.proxy("no-such-proxy")
    assert missing.value.status == 404
    assert missing.value.error.startswith("proxy not found")
    with pytest.raises(ToxiproxyError) as no_upstream:
        await api.create_proxy("no-upstream", upstream="")
    assert no_upstream.value.status == 400
    assert no_upstream.value.error.startswith("missing required field: upstream")


@pytest.mark.asyncio
async def test_error_body_is_json_error_and_status(echo_rig: Rig) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{echo_rig.api.api_url}/proxies/no-such-proxy") as response,
    ):
        body = await response.json(content_type=None)
    assert response.status == 404
    assert body["status"] == 404
    assert body["error"].startswith("proxy not found")


@pytest.mark.asyncio
async def test_toxic_defaults_list_update_and_delete(echo_rig: Rig) -> None:
    api, name = echo_rig.api, echo_rig.proxy.name
    toxic = await api.add_toxic(name, type="latency", attributes={"latency": 50})
    assert (toxic.name, toxic.stream, toxic.toxicity) == ("latency_downstream", "downstream", 1.0)
    assert toxic.attributes == {"latency": 50, "jitter": 0}
    await api.add_toxic(name, type="bandwidth", stream="upstream", name="slow_up", attributes={"rate": 9})
    assert [t.name for t in await api.toxics(name)] == ["slow_up", "latency_downstream"]
    assert [t.name for t in (await api.proxy(name)).toxics] == ["slow_up", "latency_downstream"]
    updated = await api.update_toxic(name, "latency_downstream", attributes={"jitter": 5}, toxicity=0.5)
    assert updated.attributes == {"latency": 50, "jitter": 5}
    assert updated.toxicity == 0.5
    await api.remove_toxic(name, "latency_downstream")
    assert [t.name for t in await api.toxics(name)] == ["slow_up"]
    with pytest.raises(ToxiproxyError) as gone:
        await api.remove_toxic(name, "latency_downstream")
    assert gone.value.status == 404


@pytest.mark.asyncio
async def test_toxic_errors(echo_rig: Rig) -> None:
    api, name = echo_rig.api, echo_rig.proxy.name
    await api.add_toxic(name, type="latency", attributes={"latency": 1})
    with pytest.raises(ToxiproxyError) as exists:
        await api.add_toxic(name, type="latency", attributes={"latency": 1})
    assert exists.value.status == 409
    with pytest.raises(ToxiproxyError) as bad_type:
        await api.add_toxic(name, type="latncy", attributes={})
    assert bad_type.value.status == 400
    assert bad_type.value.error.startswith("invalid toxic type")
    with pytest.raises(ToxiproxyError) as bad_stream:
        await api.add_toxic(name, type="latency", stream="sideways", attributes={})
    assert bad_stream.value.status == 400
    with pytest.raises(ToxiproxyError) as no_proxy:
        await api.add_toxic("no-such-proxy", type="latency", attributes={})
    assert no_proxy.value.status == 404


@pytest.mark.asyncio
async def test_reset_removes_every_toxic(echo_rig: Rig) -> None:
    api, name = echo_rig.api, echo_rig.proxy.name
    await api.add_toxic(name, type="latency", attributes={"latency": 1})
    await api.add_toxic(name, type="timeout", stream="upstream", attributes={"timeout": 0})
    await api.reset()
    assert await api.toxics(name) == []


@pytest.mark.asyncio
async def test_populate_creates_and_keeps(api: ToxiproxyClient) -> None:
    target = await TcpTarget(echo).start()
    try:
        spec = [{"name": "populated", "listen": "127.0.0.1:0", "upstream": target.address}]
        created = await api.populate(spec)
        assert [proxy.name for proxy in created] == ["populated"]
        assert created[0].listen_port > 0
        assert "populated" in await api.proxies()
        with pytest.raises(ToxiproxyError) as bad:
            await api.populate([{"name": "no-upstream"}])
        assert bad.value.status == 400
    finally:
        await target.stop()


@pytest.mark.asyncio
async def test_update_proxy_with_patch_moves_the_upstream(echo_rig: Rig) -> None:
    other = await TcpTarget(echo).start()
    try:
        moved = await echo_rig.api.update_proxy(echo_rig.proxy.name, upstream=other.address)
        assert moved.upstream == other.address
        client = await echo_rig.connect()
        try:
            await client.roundtrip_s()
        finally:
            client.close()
        assert other.connections == 1
    finally:
        await other.stop()
