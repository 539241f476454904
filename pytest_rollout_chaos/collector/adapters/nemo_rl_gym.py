"""NeMo Gym's own client for the ``nemo_rl`` adapter, where ``nemo_gym`` imports in NeMo RL's interpreter.

NeMo RL's ``NemoGym._spinup`` starts NeMo Gym's servers, then sets ``head_server_config`` and
``rch = RolloutCollectionHelper()``; ``run_rollouts`` calls ``rch.run_examples``. The adapter
stands in for ``RunHelper.start`` only (``nemo_rl_actor.StackServers``); NeMo Gym's client itself
(``own_gym``) is built where NeMo RL's code runs: in this process without Ray, on the collection's
event loop, and in the actor's Ray worker with it (``InActor``). Each call is first told to a ledger
(``GymHelper.begin``, or the relay's from a worker): a second call in a collection is NeMo RL's
retry of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_rollout_chaos.collector.adapters import own_gym


def described(found: str) -> str:
    """What plays NeMo Gym's client when NeMo Gym ``found`` ran (``rollout-chaos gate``, reports)."""
    return (
        f"NeMo Gym's own (nemo-gym {found}): nemo_gym.rollout_collection.RolloutCollectionHelper, built in "
        "the NemoGym actor's process with BaseServerConfig of the stack's head server; stands in only for "
        "RunHelper.start (the stack's servers run already)"
    )


@dataclass(frozen=True, slots=True)
class InActor:
    """NeMo Gym's client for a Ray actor, built in its worker by ``install`` (NeMo Gym's helper is
    not sent over: it is made where NeMo RL's ``_spinup`` would make it); picklable."""

    head_url: str | None
    ledger: Any  # nemo_rl_relay.RelayHelper: this process's GymHelper.begin, over the relay

    def install(self, actor: Any) -> None:
        rch, head_server_config = own_gym.own_client(self.head_url, adapter="nemo_rl")
        actor.rch = own_gym.OwnGym(rch, self.ledger)
        actor.head_server_config = head_server_config
