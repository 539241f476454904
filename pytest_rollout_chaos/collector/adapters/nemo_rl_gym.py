"""NeMo Gym's own client for the ``nemo_rl`` adapter, where ``nemo_gym`` imports in NeMo RL's interpreter.

NeMo RL's ``NemoGym._spinup`` starts NeMo Gym's servers (``RunHelper().start(...)``), then sets
``head_server_config = BaseServerConfig(host, port)`` of its head server and ``rch =
RolloutCollectionHelper()``; ``run_rollouts`` then calls ``rch.run_examples(examples=...,
head_server_config=...)``. Here the stack's servers run already, so ``RunHelper.start`` is what
the adapter stands in for (``nemo_rl_actor.StackServers``); the rest is NeMo Gym's, built where
NeMo RL's code runs: ``BaseServerConfig`` of the stack's head server and a
``RolloutCollectionHelper()``, whose ``run_examples`` reads every server's address from that head
(each agent at the end of its ``collector->agent`` link) and POSTs each row to ``/run`` with NeMo
Gym's own transport (its process-wide aiohttp client, its retries, no deadline).

``OwnGym`` is what the actor holds as ``rch``: NeMo Gym's helper, its arguments and answers passed
through unchanged. Before each call it asks a ledger (``GymHelper.begin``, or the relay's, from a
Ray actor's worker) two things: to record the call (a second one in a collection is NeMo RL's
retry of the batch), and how many of the awaitables to hand on. That count is all of them unless
the ``short_results`` fault armed the collection's Gym client: it is that fault, acting on NeMo
Gym's client from outside it, recorded as it is on the stand-in (``collector info
short_results``).

Without Ray the actor runs in this process, on the collection's event loop, so NeMo Gym's
process-wide aiohttp client is created on that loop; the collection ends as the actor's process
would (with Ray it is killed): ``end_process_client`` closes that client with NeMo Gym's own
``global_aiohttp_client_exit``, so the next collection's loop gets a client of its own. Importing
``nemo_gym`` here has NeMo Gym's import-time effects on this process, as on an actor's: ``print``
always flushes, ``HF_HOME`` and ``HF_DATASETS_CACHE`` default to ``./cache/huggingface`` when
unset, and ``sys.path`` puts the working directory and NeMo Gym's own root last.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import itertools
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from pytest_rollout_chaos.errors import CollectorTargetError

DISTRIBUTION = "nemo-gym"


class Ledger(Protocol):
    """Where a call of NeMo Gym's ``run_examples`` is recorded, and says how many results go on."""

    def begin(self, rows: int) -> int: ...


def version() -> str | None:
    """The installed NeMo Gym's version when ``nemo_gym`` can be found here, else None. Found and
    then failing to import is not a reason to stand in for it: ``own_client`` raises then."""
    if importlib.util.find_spec("nemo_gym") is None:
        return None
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (nemo_gym imports, its distribution metadata is missing)"


def described(found: str) -> str:
    """What plays NeMo Gym's client when NeMo Gym ``found`` ran (``rollout-chaos gate``, reports)."""
    return (
        f"NeMo Gym's own (nemo-gym {found}): nemo_gym.rollout_collection.RolloutCollectionHelper, built in "
        "the NemoGym actor's process with BaseServerConfig of the stack's head server; stands in only for "
        "RunHelper.start (the stack's servers run already)"
    )


def preload() -> None:
    """Import NeMo Gym's client now, off any deadline (the first import takes seconds)."""
    _client_classes()


def own_client(head_url: str | None) -> tuple[Any, Any]:
    """``RolloutCollectionHelper()`` and ``BaseServerConfig(host, port)`` of the head at ``head_url``,
    as ``NemoGym._spinup`` builds them; call it in the process NeMo RL's actor runs in."""
    if head_url is None:
        raise CollectorTargetError(
            "the nemo_rl adapter hands NeMo Gym's client the stack's head server; the context has no head_url"
        )
    helper_class, config_class = _client_classes()
    head = urlsplit(head_url)
    return helper_class(), config_class(host=head.hostname, port=head.port)


def _client_classes() -> tuple[Any, Any]:
    """NeMo Gym's ``RolloutCollectionHelper`` and ``BaseServerConfig``; found but failing to import
    is an error, never a reason to stand in for it."""
    try:
        from nemo_gym.rollout_collection import RolloutCollectionHelper
        from nemo_gym.server_utils import BaseServerConfig
    except ImportError as error:
        raise CollectorTargetError(
            f"nemo_gym is installed ({version()}) but NeMo Gym's client does not import: "
            f"{type(error).__name__}: {error}"
        ) from error
    return RolloutCollectionHelper, BaseServerConfig


class OwnGym:
    """The actor's ``rch``: NeMo Gym's ``RolloutCollectionHelper``, each call first told to ``ledger``."""

    def __init__(self, rch: Any, ledger: Ledger) -> None:
        self.rch = rch
        self.ledger = ledger

    def run_examples(
        self, examples: list[dict[str, Any]], head_server_config: Any = None, semaphore: Any = None
    ) -> Iterator[Awaitable[Any]]:
        keep = self.ledger.begin(len(examples))
        awaitables = self.rch.run_examples(
            examples=examples, head_server_config=head_server_config, semaphore=semaphore
        )
        return awaitables if keep >= len(examples) else itertools.islice(awaitables, keep)


@dataclass(frozen=True, slots=True)
class InActor:
    """NeMo Gym's client for a Ray actor, built in its worker by ``install`` (NeMo Gym's helper is
    not sent over: it is made where NeMo RL's ``_spinup`` would make it); picklable."""

    head_url: str | None
    ledger: Any  # nemo_rl_relay.RelayHelper: this process's GymHelper.begin, over the relay

    def install(self, actor: Any) -> None:
        rch, head_server_config = own_client(self.head_url)
        actor.rch = OwnGym(rch, self.ledger)
        actor.head_server_config = head_server_config


async def end_process_client() -> None:
    """Close NeMo Gym's process-wide aiohttp client on this loop, then forget it (NeMo Gym's
    ``global_aiohttp_client_exit``, as at the exit of an actor's process); none made, nothing done."""
    from nemo_gym import server_utils

    if not server_utils.is_global_aiohttp_client_setup():
        return
    await server_utils.get_global_aiohttp_client().close()
    # Its exit runs asyncio.run(close()), which needs a thread without a running loop; closed, it is quick.
    await asyncio.to_thread(server_utils.global_aiohttp_client_exit)
