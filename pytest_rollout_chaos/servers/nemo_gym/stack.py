"""The nemo-gym backend: start real NeMo Gym servers as a ``GymStack`` collectors cannot tell apart.

Each server (``vllm_model``, ``equivalence_rule`` and one ``simple_agent`` per agent instance)
is its own process, launched directly from the installed wheel by ``launch.py`` with its
resolved config, so process faults (kill, freeze, restart) apply to it alone. Ports are
reserved just before each start because NeMo Gym servers bind the port their config names
(and a restart binds it again). Every link goes
through ``link(name, upstream_url)`` exactly as in the embedded stack, and the head server is
ours (it serves the config a real ``RolloutCollectionHelper`` reads), so rows, link names,
scenario server names and result shapes are the same on both backends.

Versions differ in how rollout collection reaches an agent, and the stack follows the wheel it
finds: up to 0.4 the client posts ``/run`` to the agent itself; from 0.5 on
``RolloutCollectionHelper`` only dispatches through environment servers, so each agent gets a
real ``legacy_agent`` relay in front of it (named ``<agent>_environment_server``), the
``collector->agent`` link ends at the relay, and the head config lists the relays.

The environment of ``CollectorContext.env`` (batched ``/step_batch``, NeMo RL's
``EnvironmentInterface``) is not a NeMo Gym server: native-style collectors talk to it directly,
as NeMo RL does to its own environments. So this stack also starts our embedded resources
server as ``gym_env``, behind the ``collector->resources`` link; environment latency
(``stack.env_latency_ms_*``) is set there, exactly as on the embedded backend.

Task mapping: rows are the embedded datasets' rows, unchanged. ``echo`` rows are graded as in
the embedded stack (exact match of the answer with ``expected_answer``). ``calculator`` rows
are graded by exact match too, so the embedded stack's ``The answer is N.`` scores 0.0 here,
and ``equivalence_rule`` has no ``calculator`` tool: a tool call gets NeMo Gym's 404 body back
as its output, and the trajectory goes on as a real simple_agent's would.

``real_servers`` names the real servers, which carry nothing of ours.
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.errors import ChaosError
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.gym.stack import (
    AGENT_TO_MODEL,
    AGENT_TO_RESOURCES,
    COLLECTOR_TO_RESOURCES,
    DEFAULT_AGENTS,
    HEAD_NAME,
    MODEL_NAME,
    RESOURCES_NAME,
    GymStack,
    Link,
    PolicyURLs,
    StartServer,
    collector_agent_link,
    direct_link,
    events_file,
    head_spec,
    policy_links,
    resources_spec,
)
from pytest_rollout_chaos.servers.nemo_gym import config as gym_config
from pytest_rollout_chaos.servers.nemo_gym.locate import GymPython
from pytest_rollout_chaos.servers.ports import free_ports
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec

LAUNCHER: Final = Path(__file__).with_name("launch.py")
ENV_NAME: Final = "gym_env"  # our resources server, as CollectorContext.env
# The real servers never call the head server; ours binds an OS-chosen port and serves the config.
HEAD_UNUSED_URL: Final = "http://127.0.0.1:0"
READY_TIMEOUT_S: Final = 90.0  # importing nemo_gym takes seconds per process on two cores
# Ray stays on loopback, writes no auth token and sends no usage stats, should anything start it.
RAY_ENV: Final = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
}


class BackendFeatureError(ChaosError):
    """A stack feature that only our own servers have was asked of real NeMo Gym servers."""


@dataclass(frozen=True, slots=True)
class NemoGymStack(GymStack):
    """A running stack of real NeMo Gym servers, plus our environment server for ``ctx.env``."""

    nemo_gym_version: str = ""
    relays: Mapping[str, str] = field(default_factory=dict)  # agent -> its environment server process

    def reset_state(self) -> None:
        """Reset the environment server; the real servers keep no per-test state we control."""
        self._control(ENV_NAME, "/_gym/reset", {})

    def set_env_latency(self, *, per_call_ms: float, per_item_ms: float) -> None:
        """Set the environment server's ``/step_batch`` cost until the next reset."""
        self._control(ENV_NAME, "/_gym/latency", {"per_call_ms": per_call_ms, "per_item_ms": per_item_ms})

    def set_rescore_bonus(self, bonus: float) -> None:
        """Our environment server (``ctx.env``'s ``/step_batch``) rescores; real ``equivalence_rule``,
        which answers ``/verify``, scores every attempt alike (``engine.run`` skips gym style)."""
        self._control(ENV_NAME, "/_gym/rescore", {"bonus": bonus})

    def set_reward_spread(self, spread: float) -> None:
        """Our environment server spreads rewards; real ``equivalence_rule`` scores by the answer
        alone (``engine.fit`` skips gym style)."""
        self._control(ENV_NAME, "/_gym/spread", {"spread": spread})

    def set_model_extra_body(self, extra_body: Mapping[str, Any]) -> None:
        """Real ``vllm_model`` takes its ``extra_body`` from its config at start only (``engine.fit``
        skips what would need it changed)."""
        raise BackendFeatureError(
            f"extra sampling fields {sorted(extra_body)} per test are a feature of the embedded model "
            "server; real vllm_model reads its extra_body from its config at start"
        )

    def set_splice(self, enabled: bool) -> None:
        """Real ``vllm_model`` never splices (vanilla re-rendering): only that can be asked for."""
        if enabled:
            raise BackendFeatureError(
                "prefix splicing is a feature of the embedded model server; real vllm_model re-renders "
                "every prompt (stack.policy.splice_prefix: false is what it does)"
            )


def nemo_gym_spec(
    instance: gym_config.Instance,
    *,
    python: Path,
    port: int,
    config: Mapping[str, object],
    log_dir: Path,
) -> ServerSpec:
    """One real NeMo Gym server, run by ``launch.py`` under the NeMo Gym interpreter."""
    return ServerSpec(
        name=instance.name,
        argv=(str(python), str(LAUNCHER), instance.server_dir),
        probe=readiness.http_ok("/"),
        env={
            "NEMO_GYM_CONFIG_DICT": gym_config.encode(config),
            "NEMO_GYM_CONFIG_PATH": instance.name,
            "HF_HOME": str(log_dir / "nemo-gym-hf"),  # NeMo Gym defaults it under the working directory
            "PYTHONUNBUFFERED": "1",
            **RAY_ENV,
        },
        port=port,
        ready_timeout_s=READY_TIMEOUT_S,
        hint=f"the real NeMo Gym server {instance.server_dir} did not come up; see its log above",
    )


def start_nemo_gym_stack(
    start: StartServer,
    log_dir: Path,
    *,
    python: GymPython,
    policy_url: PolicyURLs,
    model: str,
    link: Link = direct_link,
    agents: Sequence[str] = DEFAULT_AGENTS,
    max_steps: int = 8,
) -> NemoGymStack:
    """Start the real servers with ``start`` (which owns stopping them) and describe them."""
    if len(set(agents)) != len(agents) or not agents:
        raise ValueError(f"agents must be distinct instance names, at least one; got {list(agents)}")
    log_dir.mkdir(parents=True, exist_ok=True)
    model_inst = gym_config.model_instance(
        MODEL_NAME, policy_base_url=[url + "/v1" for url in policy_links(link, policy_url)], model=model
    )
    resources_inst = gym_config.resources_instance(RESOURCES_NAME)
    agent_insts = [
        gym_config.agent_instance(name, resources=RESOURCES_NAME, model=MODEL_NAME, max_steps=max_steps)
        for name in agents
    ]
    relay_insts = [gym_config.relay_instance(name) for name in agents] if python.environment_relay else []
    instances = [model_inst, resources_inst, *agent_insts, *relay_insts]
    ports: dict[str, int] = {}
    real: dict[str, str] = {}

    def spec(instance: gym_config.Instance, addresses: Mapping[str, str]) -> ServerSpec:
        known = [other for other in instances if other.name in addresses or other is instance]
        view = gym_config.global_config(
            known, {**addresses, instance.name: real[instance.name]}, head_url=HEAD_UNUSED_URL
        )
        return nemo_gym_spec(
            instance, python=python.path, port=ports[instance.name], config=view, log_dir=log_dir
        )

    # Ports are reserved just before each phase, so proxies (OS-chosen ports) cannot take them.
    processes: dict[str, ManagedProcess] = {}
    _reserve(ports, real, [model_inst, resources_inst], start)
    processes.update(
        _start_all(
            start,
            [spec(model_inst, real), spec(resources_inst, real), resources_spec(log_dir, name=ENV_NAME)],
        )
    )
    peers = {
        MODEL_NAME: link(AGENT_TO_MODEL, real[MODEL_NAME]),
        RESOURCES_NAME: link(AGENT_TO_RESOURCES, real[RESOURCES_NAME]),
    }
    # A relay reaches its agent directly: the collector->agent link is in front of the relay.
    _reserve(ports, real, [*agent_insts, *relay_insts], start)
    agent_addresses = {**peers, **{agent.name: real[agent.name] for agent in agent_insts}}
    processes.update(
        _start_all(
            start,
            [spec(agent, peers) for agent in agent_insts]
            + [spec(relay, agent_addresses) for relay in relay_insts],
        )
    )
    front = {name: gym_config.relay_name(name) if relay_insts else name for name in agents}
    agent_urls = {name: link(collector_agent_link(name), real[front[name]]) for name in agents}
    # Clients see each agent, and its environment server, at the end of its collector->agent link.
    public_addresses = {
        **peers,
        **agent_urls,
        **{gym_config.relay_name(name): agent_urls[name] for name in agents if relay_insts},
    }
    config_file = log_dir / "nemo_gym_global_config.json"
    public = gym_config.global_config(instances, public_addresses, head_url=HEAD_UNUSED_URL)
    processes[HEAD_NAME] = start(
        head_spec(log_dir, config_file=config_file, config=json.dumps(public, indent=2))
    )
    return NemoGymStack(
        head_url=processes[HEAD_NAME].url,
        agents=agent_urls,
        model_url=real[MODEL_NAME],
        resources_url=link(COLLECTOR_TO_RESOURCES, processes[ENV_NAME].url),
        processes=processes,
        events_files=[events_file(log_dir, HEAD_NAME), events_file(log_dir, ENV_NAME)],
        real_servers=frozenset(instance.name for instance in instances),
        nemo_gym_version=python.nemo_gym_version,
        relays={name: gym_config.relay_name(name) for name in agents if relay_insts},
    )


def _reserve(
    ports: dict[str, int], real: dict[str, str], instances: Sequence[gym_config.Instance], start: StartServer
) -> None:
    """Reserve distinct free ports for ``instances``, each at the address it will listen on."""
    for instance, port in zip(instances, free_ports(len(instances)), strict=True):
        ports[instance.name] = port
        real[instance.name] = f"http://{_host_of(start, instance.name)}:{port}"


def _host_of(start: StartServer, name: str) -> str:
    """Where ``start`` runs server ``name``: its node's address when it places servers on the nodes
    of a Ray cluster (``HostedStart.host_for``), loopback otherwise. A NeMo Gym server binds the
    host its config gives it, so the config must name that address before the server starts."""
    host_for = getattr(start, "host_for", None)
    return str(host_for(name)) if callable(host_for) else "127.0.0.1"


def _start_all(start: StartServer, specs: Sequence[ServerSpec]) -> dict[str, ManagedProcess]:
    """Start ``specs`` at once (each spends seconds importing NeMo Gym); first failure raised."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(specs)) as pool:
        futures = {spec.name: pool.submit(start, spec) for spec in specs}
        concurrent.futures.wait(futures.values())
    return {name: future.result() for name, future in futures.items()}
