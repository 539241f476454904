"""NeMo Gym's own client for an adapter whose trainer calls it, built against the stack's servers.

NeMo RL's ``NemoGym._spinup`` and the verl recipe's ``_init_nemo_gym`` both start NeMo Gym's
servers (``RunHelper().start(...)``), then build ``head_server_config = BaseServerConfig(host,
port)`` of the head server and ``RolloutCollectionHelper()``, whose ``run_examples(examples=...,
head_server_config=...)`` the trainer awaits. Here the stack's servers run already, so
``RunHelper.start`` is what an adapter stands in for; the rest is NeMo Gym's (``own_client``):
``run_examples`` reads every server's address from that head (each agent at the end of its
``collector->agent`` link) and POSTs each row to ``/run`` with NeMo Gym's own transport (its
process-wide aiohttp client, its retries, no deadline).

``OwnGym`` is what the trainer holds as its helper: NeMo Gym's, its arguments and answers passed
through unchanged. Before each call it asks a ledger (``Ledger.begin``) how many of the awaitables
to hand on: all of them unless the ``short_results`` fault armed the collection's Gym client; that
is the fault, acting on NeMo Gym's client from outside it, recorded as on the stand-in
(``collector info short_results``).

NeMo Gym's aiohttp client belongs to the loop it was made on; a collection ends as the trainer's
process would, with ``end_process_client`` (NeMo Gym's own ``global_aiohttp_client_exit``), so the
next collection's loop gets a client of its own. Importing ``nemo_gym`` has NeMo Gym's import-time
effects on this process: ``print`` always flushes, ``HF_HOME`` and ``HF_DATASETS_CACHE`` default
to ``./cache/huggingface`` when unset, and ``sys.path`` puts the working directory and NeMo Gym's
own root last.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import itertools
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path
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
    spec = importlib.util.find_spec("nemo_gym")
    if spec is None or not any(
        Path(place, "rollout_collection.py").is_file() for place in spec.submodule_search_locations or ()
    ):
        return None  # none, or another package of that name (the verl recipe's folder, first on sys.path)
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown (nemo_gym imports, its distribution metadata is missing)"


def preload() -> None:
    """Import NeMo Gym's client now, off any deadline (the first import takes seconds)."""
    _client_classes()


def own_client(head_url: str | None, *, adapter: str) -> tuple[Any, Any]:
    """``RolloutCollectionHelper()`` and ``BaseServerConfig(host, port)`` of the head at ``head_url``,
    as the trainer builds them; call it in the process the trainer's helper runs in."""
    if head_url is None:
        raise CollectorTargetError(
            f"the {adapter} adapter hands NeMo Gym's client the stack's head server; "
            "the context has no head_url"
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


@dataclass(frozen=True, slots=True)
class GymFaults:
    """A ``Ledger`` that records nothing: the ``short_results`` fault armed on the collection's Gym
    client (``gym``) decides how many results go on, as it does on the stand-in."""

    gym: Any

    def begin(self, rows: int) -> int:
        shorten = getattr(self.gym, "results_to_yield", None)  # a GymClient's; a runner may lack it
        return rows if shorten is None else int(shorten(rows))


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


async def end_process_client() -> None:
    """Close NeMo Gym's process-wide aiohttp client on this loop, then forget it (NeMo Gym's
    ``global_aiohttp_client_exit``, as at the exit of an actor's process); none made, nothing done."""
    from nemo_gym import server_utils

    if not server_utils.is_global_aiohttp_client_setup():
        return
    await server_utils.get_global_aiohttp_client().close()
    # Its exit runs asyncio.run(close()), which needs a thread without a running loop; closed, it is quick.
    await asyncio.to_thread(server_utils.global_aiohttp_client_exit)
