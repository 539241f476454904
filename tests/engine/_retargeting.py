"""A reference collector that declares a retarget, to show the schedule fires a moved fault where it
was moved: the agent's ``/run`` start onto the ``/seed_session`` the agent sends the resources
server for that row."""

from __future__ import annotations

from typing import ClassVar

from pytest_rollout_chaos.collector.abilities import Retarget
from pytest_rollout_chaos.collector.reference import ReferenceCollector


class SeedSessionCollector(ReferenceCollector):
    """The reference collector; its ``trajectory_exception`` on an agent's ``/run`` acts on the row's
    ``/seed_session`` instead."""

    retargets: ClassVar = (
        Retarget(
            "agent",
            "resources",
            "the row's session seeded by the agent",
            kinds=("trajectory_exception",),
            route="/run",
            to_route="/seed_session",
        ),
    )


factory = SeedSessionCollector
