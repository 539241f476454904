"""The closed sets of names the scenario format uses: fault kinds, servers, links, invariants,
witnesses, triggers.

These names are part of the scenario format and of the plugin's interface. Fault kinds, and
which targets each takes, come from the fault classes in the registry (their ``targets``);
fault *parameters* too (see ``params``). This module names the servers and links they mean.
"""

from __future__ import annotations

from typing import Final, Literal

from pytest_rollout_chaos import targets
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.invariants import registry as invariant_registry
from pytest_rollout_chaos.invariants import witnesses
from pytest_rollout_chaos.servers.gym.tasks import AGENT_FOR_TASK, TASKS
from pytest_rollout_chaos.servers.policy import replicas

FAULT_KINDS: Final = tuple(registry.FAULTS)

SERVERS: Final = ("policy", "model", "resources", "agent", "head")
LINKS: Final = (
    "agent->model",
    "agent->resources",
    "model->policy",
    "collector->agent",
    "collector->resources",
)
GYM_CLIENT: Final = "gym_client"
COLLECTOR: Final = "collector"
# ``agent`` names every agent server; an instance name (one per task) names one of them.
AGENT_INSTANCES: Final = tuple(AGENT_FOR_TASK[task] for task in TASKS)
TASK_NAMES: Final = TASKS

# ``policy`` names every policy replica; ``policy[i]`` one of them (``--rollout-chaos-policy-replicas``,
# ``stack.policy.replicas``), in a server target and at the end of a link (``model->policy[1]``).
POLICY: Final = replicas.POLICY
replica_of = replicas.replica_of
replica_names = replicas.indexed_names


# Faults whose target is fixed by what they act on (``cancel``: the collection itself); a step
# may leave the target out, and gets the first.
FIXED_TARGETS: Final[dict[str, tuple[str, ...]]] = {
    kind: cls.targets for kind, cls in registry.FAULTS.items() if isinstance(cls.targets, tuple)
}

# The invariants' own registry names them; the format accepts exactly those.
INVARIANTS: Final = invariant_registry.NAMES
STANDING_INVARIANTS: Final = invariant_registry.STANDING
WITNESSES: Final = witnesses.NAMES

TriggerKind = Literal["start", "after_completed", "after_s", "on_request"]
TRIGGERS: Final = ("start", "after_completed", "after_s", "on_request")

# The trainers an adapter drives: the first part of a ``workload.trainer_config`` key.
TRAINERS: Final = targets.TRAINERS

Mode = Literal["train", "validation"]
MODES: Final = ("train", "validation")
Style = Literal["gym", "native"]
STYLES: Final = ("gym", "native")
# How the rows' ``_rowidx`` are numbered (in the rows' task-by-task layout): 0..N-1, from 1000 on,
# or every third number from 7; and in which order the prompts' groups are handed over.
RowIds = Literal["positions", "offset", "sparse"]
ROW_IDS: Final = ("positions", "offset", "sparse")
RowOrder = Literal["by_task", "interleaved", "shuffled"]
ROW_ORDERS: Final = ("by_task", "interleaved", "shuffled")

# Scenario names become pytest item names and file names; tags become pytest markers, so
# they must be usable in ``-m`` expressions.
NAME_PATTERN: Final = r"[a-z0-9][a-z0-9_-]*"
TAG_PATTERN: Final = r"(?!(?:and|or|not)$)[a-z_][a-z0-9_]*"


def targets_for(kind: str) -> tuple[str, ...]:
    """The valid targets of a fault kind, as its class declares them (``Fault.targets``)."""
    targets = registry.fault_class(kind).targets
    if isinstance(targets, tuple):
        return targets
    return LINKS if targets == "links" else SERVERS + AGENT_INSTANCES


def valid_target(kind: str, target: str) -> bool:
    """Whether ``target`` is a valid target of ``kind``: one of ``targets_for``, or a policy replica
    (``policy[i]``, ``model->policy[i]``) where the kind takes ``policy`` (``model->policy``)."""
    base, _ = replica_of(target)
    return base in targets_for(kind) and (base == target or base.endswith(POLICY))


def replica_pattern(kind: str) -> str | None:
    """The JSON Schema pattern of the replica targets ``kind`` takes (``policy[i]``), or None."""
    bases = [target for target in targets_for(kind) if target.endswith(POLICY)]
    if not bases:
        return None
    return "^(" + "|".join(bases) + r")\[[0-9]+\]$"  # the names hold no regex metacharacter


def targets_text(kind: str) -> str:
    """The valid targets of ``kind`` for a message, with the replica forms it takes."""
    targets = targets_for(kind)
    replicas = [f"{target}[i]" for target in targets if target.endswith(POLICY)]
    text = ", ".join(targets)
    return f"{text}; {', '.join(replicas)} for one policy replica" if replicas else text
