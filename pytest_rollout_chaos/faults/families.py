"""The fault families: what each fault kind acts on, which decides where it can act.

A network fault acts on a link (Toxiproxy), a process fault on a server process this run
started, a Ray fault on a server's Ray actor or node (``--rollout-chaos-ray``), a semantic
fault on the answers, from the fault layer. The scenario format, the applicability checks of
a scenario and of ``chaos_faults`` read the family from here; ``registry`` holds the classes.
"""

from __future__ import annotations

from typing import Final, Literal

Family = Literal["network", "process", "ray", "semantic"]

NETWORK_FAULTS: Final = (
    "latency",
    "bandwidth",
    "slow_close",
    "timeout",
    "reset_peer",
    "slicer",
    "limit_data",
    "down",
)
PROCESS_FAULTS: Final = ("kill", "oom", "freeze", "exit_zero", "restart")
RAY_FAULTS: Final = ("actor_kill", "node_down")  # act on a server's Ray actor or node: --rollout-chaos-ray
SEMANTIC_FAULTS: Final = (
    "http_error",
    "nan_logprobs",
    "prefix_drift",
    "malformed_json",
    "trajectory_exception",
    "hang",
    "short_results",
    "slow_env",
    "cancel",
)
FAULT_KINDS: Final = NETWORK_FAULTS + PROCESS_FAULTS + RAY_FAULTS + SEMANTIC_FAULTS


def category(kind: str) -> Family | None:
    """Which family a fault kind belongs to; ``None`` for a kind this table does not know."""
    if kind in NETWORK_FAULTS:
        return "network"
    if kind in PROCESS_FAULTS:
        return "process"
    if kind in RAY_FAULTS:
        return "ray"
    if kind in SEMANTIC_FAULTS:
        return "semantic"
    return None
