"""The one stack builder: the system under test from a run's settings, with or without pytest.

``StackBuilder`` starts each part on first use (Toxiproxy, the fault layer, the links, the Ray
cluster, the policy replicas, the Gym stack, then the ``ChaosStack`` over them all) and gives every
process to its ``ProcessKeeper``, which stops them, newest first, on every path. pytest's fixtures
are views over the session's builder, so a test asking only for the policy starts only the policy;
``open_stack`` is the same whole stack as a context manager (like a testcontainers container),
for the benchmarks, the engine's own tests and ``rollout-chaos run``.
"""

from __future__ import annotations

import contextlib
import functools
import shlex
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pytest_rollout_chaos.servers.keeper import ProcessKeeper
from pytest_rollout_chaos.settings import ChaosSettings

if TYPE_CHECKING:
    from pytest_rollout_chaos.ray.hosted import HostedStart
    from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer
    from pytest_rollout_chaos.servers.gym.stack import GymStack, Link
    from pytest_rollout_chaos.servers.links import ProxyLinks
    from pytest_rollout_chaos.servers.policy.spec import PolicyServer
    from pytest_rollout_chaos.servers.policy.vllm import VllmPython
    from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
    from pytest_rollout_chaos.servers.toxiproxy.handle import ChaosToxiproxy
    from pytest_rollout_chaos.stack import ChaosStack


LinkKind = Literal["proxied", "layer"]


@dataclass(frozen=True, slots=True)
class GymShape:
    """What the embedded Gym stack's own tests vary: spliced prefixes and the agents' turn limit."""

    splice: bool = True
    max_steps: int = 8


class StackBuilder:
    """The parts of one run's stack, each started once, on first use, into ``keeper``.

    ``replicas`` is how many policy servers to start (default: the settings'); ``external_policy``
    a policy server already running and ready (``--rollout-chaos-policy-url``, or a test's), used
    instead of starting one; ``ray_dir`` where Ray's files go (default: a new folder in the keeper's
    log directory). ``links`` is how each arrow between servers is made: a fault-layer listener and a
    Toxiproxy proxy (a run), a fault-layer listener only (semantic faults and recording, no TCP
    faults, no Toxiproxy), or a test's or benchmark's own ``Link``; ``gym`` the Gym stack's shape.
    """

    def __init__(
        self,
        settings: ChaosSettings,
        keeper: ProcessKeeper,
        *,
        replicas: int | None = None,
        external_policy: PolicyServer | None = None,
        ray_dir: Path | None = None,
        links: LinkKind | Link = "proxied",
        gym: GymShape = GymShape(),
    ) -> None:
        self.settings = settings
        self.keeper = keeper
        self._replicas = replicas or settings.policy_replicas
        self._external_policy = external_policy
        self._ray_dir = ray_dir
        self._link_kind = links
        self._gym_shape = gym

    @functools.cached_property
    def toxiproxy(self) -> ChaosToxiproxy:
        """The run's Toxiproxy (per --rollout-chaos-toxiproxy), stopped with the keeper."""
        from pytest_rollout_chaos.servers.toxiproxy.controller import start_toxiproxy
        from pytest_rollout_chaos.servers.toxiproxy.handle import ChaosToxiproxy

        server = start_toxiproxy(
            self.settings.toxiproxy, harness_start=self.keeper.start, seed=self.settings.seed
        )
        self.keeper.defer(server.stop)
        self.keeper.summary_lines.append(server.describe())
        return ChaosToxiproxy(server)

    @functools.cached_property
    def ray(self) -> HostedStart | None:
        """With ``--rollout-chaos-ray``, the cluster (started or joined) and the ``start`` that puts
        each policy and Gym server in a Ray actor on its node; None when Ray is off. The cluster is
        closed after every server on it has stopped. ``RayClusterError`` when it cannot be had."""
        if not self.settings.ray.on:
            return None
        from pytest_rollout_chaos.ray.hosted import HostedStart
        from pytest_rollout_chaos.ray.launch import open_cluster

        ray_dir = self._ray_dir or Path(tempfile.mkdtemp(prefix="ray", dir=self.keeper.log_dir))
        cluster = open_cluster(self.settings.ray, ray_dir, self.keeper.log_dir, self.keeper.run_id)
        self.keeper.defer(cluster.close)
        self.keeper.summary_lines.append(cluster.describe())
        return HostedStart(self.keeper, cluster)

    @functools.cached_property
    def policy_replicas(self) -> tuple[PolicyServer, ...]:
        """The policy servers: the tiny torch model or ``vllm serve`` (``--rollout-chaos-backend``),
        each in its own process group; or the one already running at ``--rollout-chaos-policy-url``,
        which is not started (no process)."""
        from pytest_rollout_chaos.servers.policy import spec
        from pytest_rollout_chaos.servers.policy.replicas import replica_names

        settings = self.settings
        if settings.policy_url is not None or self._external_policy is not None:
            return (self._external(settings.policy_url),)
        vllm = None
        if settings.backend == "vllm":
            from pytest_rollout_chaos.servers.policy.vllm import locate

            vllm = locate(settings.vllm_python)  # checked before the run starts; cached
            self.keeper.summary_lines.append(f"vllm backend: {vllm.describe()}")
        if self._replicas > 1:
            self.keeper.summary_lines.append(f"policy: {self._replicas} replicas behind the model server")
        replicas = []
        for name in replica_names(self._replicas):
            events_file = self.keeper.log_dir / f"{name}.events.jsonl"
            pins_tool_calls = False
            if vllm is not None:
                from pytest_rollout_chaos.servers.policy.vllm import pins_tool_calls as pins
                from pytest_rollout_chaos.servers.ports import free_port

                server_spec = self._vllm_spec(vllm, name, events_file=events_file, port=free_port())
                pins_tool_calls = pins(vllm, server_spec, settings.model)
            else:
                server_spec = spec.tiny_policy_spec(
                    settings.model, name=name, seed=settings.seed, events_file=events_file
                )
            process = self.start(server_spec)
            replicas.append(
                spec.PolicyServer.of(
                    process,
                    model=spec.DEFAULT_SERVED_MODEL_NAME,
                    model_dir=settings.model,
                    backend=settings.backend,
                    pins_tool_calls=pins_tool_calls,
                )
            )
        return tuple(replicas)

    @functools.cached_property
    def fault_layer(self) -> FaultLayer:
        """The HTTP fault layer: it records every link's traffic into the History and applies the
        semantic faults, in front of every server."""
        from pytest_rollout_chaos.servers.faultlayer.spec import NAME, FaultLayer, fault_layer_spec

        events_file = self.keeper.log_dir / f"{NAME}.events.jsonl"
        processes = self.settings.layer_processes
        spec = fault_layer_spec(events_file, processes=processes)
        return FaultLayer(self.keeper.start(spec).url, events_file, processes)

    @functools.cached_property
    def links(self) -> ProxyLinks:
        """One fault-layer listener and one Toxiproxy proxy per link, created as the stack starts;
        the proxies listen where every server reaches them (loopback, or this machine's address in
        a Ray cluster with nodes on other machines)."""
        from pytest_rollout_chaos.servers.links import ProxyLinks

        if self._link_kind != "proxied":
            raise RuntimeError("this stack was built without Toxiproxy proxies (links=...)")
        listen_host = self.ray.cluster.driver_address if self.ray is not None else "127.0.0.1"
        return ProxyLinks(self.toxiproxy.api_url, self.fault_layer.url, listen_host=listen_host)

    @functools.cached_property
    def link(self) -> Link:
        """How each arrow between servers is made, per the builder's ``links``."""
        if self._link_kind == "proxied":
            return self.links
        if self._link_kind == "layer":
            from pytest_rollout_chaos.servers.links import LayerLinks

            return LayerLinks(self.fault_layer.url)
        return self._link_kind

    @functools.cached_property
    def collector_policy_url(self) -> str:
        """The policy's OpenAI base URL as the collector reaches it: through the ``collector->policy``
        link (to the first replica, ``collector->policy[0]``, when there are several)."""
        from pytest_rollout_chaos.servers.links import COLLECTOR_TO_POLICY
        from pytest_rollout_chaos.servers.policy.replicas import replica_names

        first = replica_names(len(self.policy_replicas))[0]
        link = COLLECTOR_TO_POLICY.removesuffix("policy") + first
        return self.link(link, self.policy_replicas[0].base_url)

    @functools.cached_property
    def gym(self) -> GymStack:
        """The Gym stack (resources, model, two agents, head) in front of the policy: our embedded
        servers or real NeMo Gym's (``--rollout-chaos-gym``, with our environment server beside
        them as ``ctx.env``). Every link between servers, and from the collector, is proxied."""
        from pytest_rollout_chaos.servers.gym.stack import eos_token_id, start_gym_stack
        from pytest_rollout_chaos.servers.policy.replicas import replica_names

        replicas = self.policy_replicas
        first = replicas[0]
        policy_urls = dict(zip(replica_names(len(replicas)), [p.url for p in replicas], strict=True))
        if self.settings.gym == "nemo-gym":
            from pytest_rollout_chaos.servers.nemo_gym.locate import locate
            from pytest_rollout_chaos.servers.nemo_gym.stack import start_nemo_gym_stack

            python = locate(self.settings.gym_python)
            self.keeper.summary_lines.append(f"nemo-gym backend: {python.describe()}")
            return start_nemo_gym_stack(
                self.ray or self.keeper.start,  # Ray's start tells each server its node's address
                self.keeper.log_dir,
                python=python,
                policy_url=policy_urls,
                model=first.model,
                link=self.link,
            )
        return start_gym_stack(
            self.start,
            self.keeper.log_dir,
            policy_url=policy_urls,
            model=first.model,
            eos_token_id=eos_token_id(first.model_dir),
            link=self.link,
            splice=self._gym_shape.splice,
            max_steps=self._gym_shape.max_steps,
        )

    @functools.cached_property
    def stack(self) -> ChaosStack:
        """The whole system under test, addressed by the scenario format's server and link names."""
        from pytest_rollout_chaos.stack import ChaosStack

        replicas, gym = self.policy_replicas, self.gym
        collector_policy_url = self.collector_policy_url  # its link first: ``links`` is read as it stands
        if self.ray is not None:
            self.keeper.summary_lines.append(self.ray.describe())
        proxied = self._link_kind == "proxied"
        return ChaosStack(
            policy=replicas[0],
            replicas=replicas,
            gym=gym,
            toxiproxy=self.toxiproxy if proxied else None,
            links=self.links.links if proxied else {},
            fault_layer=self.fault_layer if proxied or self._link_kind == "layer" else None,
            collector_policy_url=collector_policy_url,
            gym_python=self.settings.gym_python,
            pull_files=self.ray.cluster.pull_files
            if self.ray is not None and self.ray.cluster.mirror
            else None,
        )

    def start(self, spec: ServerSpec) -> ManagedProcess:
        """Start a policy or Gym server: in a Ray actor on its node with Ray on, else here."""
        return (self.ray or self.keeper.start)(spec)

    def _vllm_spec(self, vllm: VllmPython, name: str, *, events_file: Path, port: int) -> ServerSpec:
        """``vllm serve`` with the defaults for the devices it will run on and the user's flags; its
        command line goes to the run's facts."""
        from pytest_rollout_chaos import preflight
        from pytest_rollout_chaos.servers.policy import gpus
        from pytest_rollout_chaos.servers.policy.spec import vllm_policy_spec
        from pytest_rollout_chaos.servers.policy.vllm import default_args

        settings = self.settings
        num_gpus = preflight.policy_gpus(settings)  # checked before the run starts
        defaults, chosen = default_args(gpus.visible(), settings.model, settings.vllm_args)
        server_spec = vllm_policy_spec(
            settings.model,
            vllm=vllm,
            name=name,
            port=port,
            seed=settings.seed,
            extra_args=defaults,
            user_args=settings.vllm_args,
            num_gpus=num_gpus,
            events_file=events_file,
        )
        self.keeper.summary_lines.append(chosen + (f"; asks Ray for {num_gpus} GPU(s)" if num_gpus else ""))
        self.keeper.summary_lines.append(f"vllm command: {shlex.join(server_spec.argv)}")
        return server_spec

    def _external(self, url: str | None) -> PolicyServer:
        """The external policy, as the caller found it ready, or connected to now."""
        from pytest_rollout_chaos.servers.policy.external import connect

        settings = self.settings
        policy = self._external_policy
        if policy is None:
            assert url is not None, "policy_replicas asks only with a URL or a policy at hand"
            policy = connect(url, model_dir=settings.model, timeout_s=settings.policy_ready_timeout_s)
        self.keeper.summary_lines.append(
            f"policy: external server at {policy.base_url}, model {policy.model!r}, "
            f"tokenizer from {policy.model_dir} (not started by this run)"
        )
        return policy


def replicas_to_start(settings: ChaosSettings, scenarios: Iterable[object]) -> int:
    """``--rollout-chaos-policy-replicas``, or more where a scenario to run asks for more
    (``stack.policy.replicas``) and the embedded model server can narrow them per scenario; real
    NeMo Gym is given its list of base URLs once, so there the option decides alone."""
    if settings.gym != "embedded":
        return settings.policy_replicas
    asked = (
        getattr(getattr(getattr(scenario, "stack", None), "policy", None), "replicas", None)
        for scenario in scenarios
    )
    return max([settings.policy_replicas, *(count for count in asked if isinstance(count, int))])


@contextlib.contextmanager
def open_stack(
    settings: ChaosSettings, log_dir: Path, *, replicas: int | None = None
) -> Iterator[ChaosStack]:
    """The whole stack ``settings`` describe, started now and stopped on leaving the block, on
    every path. Each server's log and events file go to ``log_dir``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with ProcessKeeper(log_dir) as keeper:
        yield StackBuilder(settings, keeper, replicas=replicas).stack
