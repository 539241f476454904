"""Toxics churned on busy connections never lose, duplicate or reorder a byte."""

from __future__ import annotations

import asyncio
import random

import pytest

from tests.integration.toxiproxy._toxiproxy_testlib import Client, Rig


async def _echo_stream(client: Client, payload: bytes) -> bytes:
    async def send() -> None:
        for start in range(0, len(payload), 1024):
            client.writer.write(payload[start : start + 1024])
            await client.writer.drain()
            await asyncio.sleep(0.005)

    sender = asyncio.create_task(send())
    received = await asyncio.wait_for(client.reader.readexactly(len(payload)), 10.0)
    await sender
    return received


@pytest.mark.asyncio
async def test_data_survives_toxic_churn(echo_rig: Rig) -> None:
    api, name = echo_rig.api, echo_rig.proxy.name
    rng = random.Random(5)
    payloads = [rng.randbytes(64 * 1024) for _ in range(6)]
    clients = [await echo_rig.connect() for _ in payloads]

    async def churn() -> None:
        for round_number in range(6):
            await api.add_toxic(name, type="latency", attributes={"latency": 20, "jitter": 10})
            await api.add_toxic(
                name,
                type="slicer",
                stream="upstream",
                attributes={"average_size": 500, "size_variation": 100},
            )
            await asyncio.sleep(0.03)
            await api.update_toxic(name, "latency_downstream", attributes={"latency": 5 * round_number})
            await api.add_toxic(name, type="bandwidth", attributes={"rate": 2000})
            await asyncio.sleep(0.03)
            await api.remove_toxic(name, "latency_downstream")
            await api.remove_toxic(name, "slicer_upstream")
            await api.remove_toxic(name, "bandwidth_downstream")

    try:
        churner = asyncio.create_task(churn())
        results = await asyncio.gather(*(_echo_stream(c, p) for c, p in zip(clients, payloads, strict=True)))
        await churner
    finally:
        for client in clients:
            client.close()
    for sent, received in zip(payloads, results, strict=True):
        assert received == sent
