"""The names of policy replicas: ``policy`` for the only one, ``policy[0]``, ``policy[1]``, ... for several.

``--rollout-chaos-policy-replicas`` starts several policy servers behind the model server; each is
a server of its own, under its own name, behind its own link (``model->policy[1]``). The scenario
format (``scenario.vocabulary``), the stack and the links read the names here.
"""

from __future__ import annotations

import re
from typing import Final

POLICY: Final = "policy"
_REPLICA: Final = re.compile(r"(?P<base>(?:.*->)?policy)\[(?P<index>[0-9]+)\]")


def replica_of(target: str) -> tuple[str, int | None]:
    """``policy[1]`` -> ``("policy", 1)``, ``model->policy[0]`` -> ``("model->policy", 0)``;
    anything else -> ``(target, None)``."""
    found = _REPLICA.fullmatch(target)
    if found is None:
        return target, None
    return found["base"], int(found["index"])


def replica_names(replicas: int) -> tuple[str, ...]:
    """The server names of ``replicas`` started policy servers: ``policy`` alone, else ``policy[i]`` each."""
    if replicas == 1:
        return (POLICY,)
    return indexed_names(replicas)


def indexed_names(replicas: int) -> tuple[str, ...]:
    """``policy[0]`` .. ``policy[replicas-1]``: the names a scenario may use for ``replicas`` replicas."""
    return tuple(f"{POLICY}[{index}]" for index in range(replicas))
