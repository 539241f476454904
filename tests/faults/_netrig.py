"""The real target of the network fault tests: a TCP server behind a proxy of the embedded Toxiproxy."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pytest_rollout_chaos.faults.base import FaultContext
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.toxiproxy.client import ProxyInfo, ToxiproxyClient
from tests.integration.toxiproxy._toxiproxy_testlib import Client, Handler, TcpTarget

LINK = "link"


@dataclass
class NetRig:
    """Target, proxy, client and a FaultContext whose link ``"link"`` is that proxy."""

    api: ToxiproxyClient
    target: TcpTarget
    proxy: ProxyInfo
    ctx: FaultContext
    history: History

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, api_url: str, handler: Handler) -> AsyncIterator[NetRig]:
        target = await TcpTarget(handler).start()
        try:
            async with ToxiproxyClient(api_url) as api:
                proxy = await api.create_proxy(f"fault-{uuid.uuid4().hex[:8]}", upstream=target.address)
                history = History()
                ctx = FaultContext(history=history, toxiproxy=api, links={LINK: proxy.name})
                try:
                    yield cls(api, target, proxy, ctx, history)
                finally:
                    await api.delete_proxy(proxy.name)
        finally:
            await target.stop()

    async def connect(self) -> Client:
        return await Client.connect(self.proxy)

    async def toxic_names(self) -> list[str]:
        return [toxic.name for toxic in await self.api.toxics(self.proxy.name)]
