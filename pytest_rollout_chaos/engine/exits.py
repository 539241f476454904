"""Whether a server's exit can reach the collector, for the invariants that judge its answer to one.

An invariant that judges how the collector answers a server going down (``judges_exits``:
``outage_fails_collection``) judges something only where that exit reaches the collector. From
NeMo Gym 0.5 on the collector meets each agent only through its ``legacy_agent`` relay, which
retries a refused agent without limit (``nemo_gym.server_utils``, ``_internal=True``): a killed
agent then looks to any collector exactly like a frozen one, so such a scenario skips there,
saying why.
"""

from __future__ import annotations

from pytest_rollout_chaos.faults import registry as faults
from pytest_rollout_chaos.invariants import registry as invariants
from pytest_rollout_chaos.scenario.model import Scenario
from pytest_rollout_chaos.servers.nemo_gym.stack import NemoGymStack
from pytest_rollout_chaos.stack import ChaosStack


def hidden_exit(scenario: Scenario, stack: ChaosStack) -> str | None:
    """Why a server exit ``scenario`` judges the collector's answer to cannot reach it, or None."""
    gym = stack.gym
    relays = gym.relays if isinstance(gym, NemoGymStack) else {}
    judging = [
        name
        for name in scenario.expect.invariants
        if getattr(invariants.BY_NAME.get(name), "judges_exits", False)
    ]
    if not isinstance(gym, NemoGymStack) or not relays or not judging:
        return None
    version = gym.nemo_gym_version
    for index, step in enumerate(scenario.faults):
        if not getattr(faults.fault_class(step.kind), "terminates_target", False):
            continue
        for server in stack.expand_target(step.target):
            if server in relays:
                return (
                    f"faults/{index} {step.kind} on {server!r}: {', '.join(judging)} judges how the "
                    f"collector answers {server}'s exit, and on NeMo Gym {version} "
                    f"the collector reaches {server} only through its legacy_agent relay "
                    f"{relays[server]!r}, which retries a dead agent without limit: the exit reaches "
                    "no collector, and the outage looks like a hang (run it on the embedded servers "
                    "or NeMo Gym 0.4)"
                )
    return None
