"""Telling a server that is gone from one that is slow, when a row waited past its deadline.

A ``/run`` with no result by ``request_timeout_s`` says only that the row is stuck: the agent may
be hung on that one trajectory, frozen, or dead (NeMo Gym's transport retries a refused
connection without limit, so a dead agent looks like a slow one). Here the collector asks the
agent itself, once, with a short deadline: a server that refuses or drops the connection is gone,
and its rows cannot complete; one that answers anything, or holds the probe, is still there.
Rows that time out together share one probe per agent.
"""

from __future__ import annotations

import asyncio
from typing import Final, Protocol, runtime_checkable

import aiohttp

from pytest_rollout_chaos.collector.failures import is_unreachable, root_cause

PROBE_S: Final = 1.0
"""How long a probe waits for any answer; a server that holds it longer is there, only slow."""


@runtime_checkable
class AgentDirectory(Protocol):
    """A Gym client that can say where an agent is (as NeMo Gym's reads it from the head config)."""

    async def agent_url(self, agent: str) -> str: ...


async def gone(url: str, *, timeout_s: float = PROBE_S) -> str | None:
    """Why the server at ``url`` is gone (refused, reset or dropped connection), else None."""
    try:
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url.rstrip("/") + "/") as answer,
        ):
            await answer.read()
    except (aiohttp.ClientError, OSError) as error:
        return root_cause(error) if is_unreachable(error) else None
    except TimeoutError:
        return None
    return None


class Probes:
    """One probe per agent at a time: rows of one agent that time out together share it."""

    def __init__(self, directory: object) -> None:
        self._directory = directory if isinstance(directory, AgentDirectory) else None
        self._running: dict[str, asyncio.Task[str | None]] = {}

    async def gone(self, agent: str) -> str | None:
        """Why ``agent`` is gone, or None (also when the Gym client cannot say where it is)."""
        if self._directory is None:
            return None
        probe = self._running.get(agent)
        if probe is None or probe.done():
            probe = asyncio.ensure_future(self._probe(self._directory, agent))
            self._running[agent] = probe
        return await asyncio.shield(probe)

    @staticmethod
    async def _probe(directory: AgentDirectory, agent: str) -> str | None:
        try:
            url = await asyncio.wait_for(directory.agent_url(agent), timeout=PROBE_S)
        except Exception:  # the head config is out of reach too: nothing learned about the agent
            return None
        return await gone(url)
