"""The public pytest fixtures: thin views over the session harness.

Every fixture that could start something depends on ``chaos_harness``, which skips the test
unless ``--rollout-chaos`` is on; so without the flag nothing is ever started.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

from pytest_rollout_chaos.harness import INJECTOR_KEY, ChaosHarness
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.plugin import EXTERNAL_POLICY_KEY, HARNESS_KEY, NOT_ENABLED, SETTINGS_KEY
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.settings import ChaosSettings

if TYPE_CHECKING:
    from pytest_rollout_chaos.collector.protocol import Collector, CollectorContext
    from pytest_rollout_chaos.injector import FaultInjector
    from pytest_rollout_chaos.ray.hosted import HostedStart
    from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer
    from pytest_rollout_chaos.servers.gym.stack import GymStack
    from pytest_rollout_chaos.servers.links import ProxyLinks
    from pytest_rollout_chaos.servers.policy.spec import PolicyServer
    from pytest_rollout_chaos.servers.policy.vllm import VllmPython
    from pytest_rollout_chaos.servers.toxiproxy.handle import ChaosToxiproxy
    from pytest_rollout_chaos.stack import ChaosStack
    from pytest_rollout_chaos.trial import Trial


@pytest.fixture(scope="session")
def chaos_settings(pytestconfig: pytest.Config) -> ChaosSettings:
    """The effective settings of this run (options over ini over defaults)."""
    return pytestconfig.stash[SETTINGS_KEY]


@pytest.fixture(scope="session")
def chaos_harness(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> ChaosHarness:
    """The session's harness; skips the test when the plugin is not enabled."""
    harness = pytestconfig.stash.get(HARNESS_KEY, None)
    if harness is None:
        pytest.skip(NOT_ENABLED)
    harness.set_log_dir(tmp_path_factory.mktemp("rollout-chaos-logs"))
    return harness


@pytest.fixture(scope="session")
def make_chaos_server(chaos_harness: ChaosHarness) -> Callable[[ServerSpec], ManagedProcess]:
    """Factory: start a ``ServerSpec`` now, stopped at session end on every path."""
    return chaos_harness.start


@pytest.fixture
def chaos_history() -> History:
    """A fresh History for one test."""
    return History()


@pytest.fixture
def chaos_scenario_runner() -> Callable[..., None]:
    """Runs one YAML scenario (``runner(scenario, request)``); override it in a conftest to change how."""
    from pytest_rollout_chaos.scenario_items import run_scenario

    return run_scenario


@pytest.fixture(scope="session")
def chaos_toxiproxy(chaos_harness: ChaosHarness, chaos_settings: ChaosSettings) -> Iterator[ChaosToxiproxy]:
    """The session's Toxiproxy (per --rollout-chaos-toxiproxy).

    It offers ``.server`` (kind, api_url), ``.client()`` (async) and ``.toxiproxy_python()``.
    """
    from pytest_rollout_chaos.servers.toxiproxy.controller import start_toxiproxy
    from pytest_rollout_chaos.servers.toxiproxy.handle import ChaosToxiproxy

    server = start_toxiproxy(
        chaos_settings.toxiproxy, harness_start=chaos_harness.start, seed=chaos_settings.seed
    )
    chaos_harness.summary_lines.append(server.describe())
    try:
        yield ChaosToxiproxy(server)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def chaos_ray(
    chaos_harness: ChaosHarness, chaos_settings: ChaosSettings, tmp_path_factory: pytest.TempPathFactory
) -> HostedStart | None:
    """With ``--rollout-chaos-ray``, the session's cluster (started or joined) and the ``start`` that puts
    each policy and Gym server in a Ray actor on its node; None when Ray is off. The cluster is
    closed after every server on it has stopped."""
    if not chaos_settings.ray.on:
        return None
    from pytest_rollout_chaos.ray.cluster import RayClusterError, open_cluster
    from pytest_rollout_chaos.ray.hosted import HostedStart

    try:
        cluster = open_cluster(
            chaos_settings.ray,
            tmp_path_factory.mktemp("ray"),
            chaos_harness.log_dir,
            chaos_harness.run_id,
        )
    except RayClusterError as error:
        pytest.exit(str(error), returncode=pytest.ExitCode.USAGE_ERROR)
    chaos_harness.defer(cluster.close)
    chaos_harness.summary_lines.append(cluster.describe())
    return HostedStart(chaos_harness, cluster)


@pytest.fixture
def chaos_toxics_reset(chaos_toxiproxy: ChaosToxiproxy) -> ChaosToxiproxy:
    """The session's Toxiproxy after a reset: every proxy enabled, no toxics (per-test state)."""
    chaos_toxiproxy.reset()
    return chaos_toxiproxy


@pytest.fixture(scope="session")
def chaos_policy_replicas(
    chaos_harness: ChaosHarness,
    chaos_settings: ChaosSettings,
    pytestconfig: pytest.Config,
    chaos_ray: HostedStart | None,
    request: pytest.FixtureRequest,
) -> tuple[PolicyServer, ...]:
    """The session's policy servers: ``--rollout-chaos-policy-replicas`` of them (more when a
    collected scenario asks for more with ``stack.policy.replicas`` and the model server can use
    fewer per scenario), each the tiny torch model or ``vllm serve`` (``--rollout-chaos-backend``)
    in its own process group; or the one server already running at ``--rollout-chaos-policy-url``,
    which is not started (no process)."""
    from pytest_rollout_chaos.servers.policy import spec
    from pytest_rollout_chaos.servers.policy.replicas import replica_names

    if chaos_settings.policy_url is not None:
        return (_external_policy(chaos_settings.policy_url, chaos_harness, chaos_settings, pytestconfig),)
    count = replicas_to_start(chaos_settings, request.session.items)
    vllm = None
    if chaos_settings.backend == "vllm":
        from pytest_rollout_chaos.servers.policy.vllm import locate

        vllm = locate(chaos_settings.vllm_python)  # checked at session start; cached
        chaos_harness.summary_lines.append(f"vllm backend: {vllm.describe()}")
    if count > 1:
        chaos_harness.summary_lines.append(f"policy: {count} replicas behind the model server")
    replicas = []
    for name in replica_names(count):
        events_file = chaos_harness.log_dir / f"{name}.events.jsonl"
        pins_tool_calls = False
        if vllm is not None:
            from pytest_rollout_chaos.servers.policy.vllm import pins_tool_calls as pins
            from pytest_rollout_chaos.servers.ports import free_port

            server_spec = _vllm_spec(
                chaos_settings, chaos_harness, vllm, name, events_file=events_file, port=free_port()
            )
            pins_tool_calls = pins(vllm, server_spec, chaos_settings.model)
        else:
            server_spec = spec.tiny_policy_spec(
                chaos_settings.model, name=name, seed=chaos_settings.seed, events_file=events_file
            )
        process = (chaos_ray or chaos_harness.start)(server_spec)
        replicas.append(
            spec.PolicyServer.of(
                process,
                model=spec.DEFAULT_SERVED_MODEL_NAME,
                model_dir=chaos_settings.model,
                backend=chaos_settings.backend,
                pins_tool_calls=pins_tool_calls,
            )
        )
    return tuple(replicas)


def replicas_to_start(settings: ChaosSettings, items: Sequence[pytest.Item]) -> int:
    """``--rollout-chaos-policy-replicas``, or more where a collected scenario asks for more
    (``stack.policy.replicas``) and the embedded model server can narrow them per scenario; real
    NeMo Gym is given its list of base URLs once, so there the option decides alone."""
    if settings.gym != "embedded":
        return settings.policy_replicas
    asked = (
        scenario.stack.policy.replicas
        for item in items
        if (scenario := getattr(item, "scenario", None)) is not None
        and getattr(getattr(scenario, "stack", None), "policy", None) is not None
    )
    return max([settings.policy_replicas, *(count for count in asked if isinstance(count, int))])


@pytest.fixture(scope="session")
def chaos_policy(chaos_policy_replicas: tuple[PolicyServer, ...]) -> PolicyServer:
    """The session's (first) policy server; ``chaos_policy_replicas`` has them all."""
    return chaos_policy_replicas[0]


def _vllm_spec(
    settings: ChaosSettings,
    harness: ChaosHarness,
    vllm: VllmPython,
    name: str,
    *,
    events_file: Path,
    port: int,
) -> ServerSpec:
    """``vllm serve`` with the defaults for the devices it will run on and the user's flags; its
    command line goes to the run's facts."""
    from pytest_rollout_chaos import preflight
    from pytest_rollout_chaos.servers.policy import gpus
    from pytest_rollout_chaos.servers.policy.spec import vllm_policy_spec
    from pytest_rollout_chaos.servers.policy.vllm import default_args

    num_gpus = preflight.policy_gpus(settings)  # checked at session start
    cards = gpus.visible()
    defaults, chosen = default_args(cards, settings.model, settings.vllm_args)
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
    harness.summary_lines.append(chosen + (f"; asks Ray for {num_gpus} GPU(s)" if num_gpus else ""))
    harness.summary_lines.append(f"vllm command: {shlex.join(server_spec.argv)}")
    return server_spec


def _external_policy(
    url: str, harness: ChaosHarness, settings: ChaosSettings, config: pytest.Config
) -> PolicyServer:
    """The external policy as found ready at session start (``plugin.pytest_sessionstart``)."""
    from pytest_rollout_chaos.servers.policy.external import connect

    policy = config.stash.get(EXTERNAL_POLICY_KEY, None)
    if policy is None:  # a run whose session start did not check it
        policy = connect(url, model_dir=settings.model, timeout_s=settings.policy_ready_timeout_s)
    harness.summary_lines.append(
        f"policy: external server at {policy.base_url}, model {policy.model!r}, "
        f"tokenizer from {policy.model_dir} (not started by this run)"
    )
    return policy


@pytest.fixture(scope="session")
def chaos_fault_layer(chaos_harness: ChaosHarness) -> FaultLayer:
    """The session's HTTP fault layer: it records every link's traffic into the History and
    applies the semantic faults, in front of every server."""
    from pytest_rollout_chaos.servers.faultlayer.spec import NAME, FaultLayer, fault_layer_spec

    events_file = chaos_harness.log_dir / f"{NAME}.events.jsonl"
    return FaultLayer(chaos_harness.start(fault_layer_spec(events_file)).url, events_file)


@pytest.fixture(scope="session")
def chaos_links(
    chaos_toxiproxy: ChaosToxiproxy, chaos_fault_layer: FaultLayer, chaos_ray: HostedStart | None
) -> ProxyLinks:
    """One fault-layer listener and one Toxiproxy proxy per link of the stack, created as it starts;
    the proxies listen where every server reaches them (loopback, or this machine's address in a
    Ray cluster with nodes on other machines)."""
    from pytest_rollout_chaos.servers.links import ProxyLinks

    listen_host = chaos_ray.cluster.driver_address if chaos_ray is not None else "127.0.0.1"
    return ProxyLinks(chaos_toxiproxy.api_url, chaos_fault_layer.url, listen_host=listen_host)


@pytest.fixture(scope="session")
def chaos_collector_policy_url(
    chaos_policy_replicas: tuple[PolicyServer, ...], chaos_links: ProxyLinks
) -> str:
    """The policy's OpenAI base URL as the collector reaches it: through the ``collector->policy`` link
    (to the first replica, ``collector->policy[0]``, when there are several)."""
    from pytest_rollout_chaos.servers.links import COLLECTOR_TO_POLICY
    from pytest_rollout_chaos.servers.policy.replicas import replica_names

    first = replica_names(len(chaos_policy_replicas))[0]
    link = COLLECTOR_TO_POLICY.removesuffix("policy") + first
    return chaos_links(link, chaos_policy_replicas[0].base_url)


@pytest.fixture(scope="session")
def chaos_gym(
    chaos_harness: ChaosHarness,
    chaos_settings: ChaosSettings,
    chaos_policy_replicas: tuple[PolicyServer, ...],
    chaos_links: ProxyLinks,
    chaos_ray: HostedStart | None,
) -> GymStack:
    """The Gym stack (resources, model, two agents, head) in front of the session's policy.

    ``--rollout-chaos-gym`` picks our embedded servers or real NeMo Gym servers (with our
    environment server beside them as ``ctx.env``, for native-style collectors). Every link
    between servers, and from the collector to them, goes through a Toxiproxy proxy.
    """
    from pytest_rollout_chaos.servers.gym.stack import eos_token_id, start_gym_stack
    from pytest_rollout_chaos.servers.policy.replicas import replica_names

    start = chaos_ray or chaos_harness.start
    chaos_policy = chaos_policy_replicas[0]
    policy_urls = dict(
        zip(replica_names(len(chaos_policy_replicas)), [p.url for p in chaos_policy_replicas], strict=True)
    )
    if chaos_settings.gym == "nemo-gym":
        from pytest_rollout_chaos.servers.nemo_gym.locate import locate
        from pytest_rollout_chaos.servers.nemo_gym.stack import start_nemo_gym_stack

        python = locate(chaos_settings.gym_python)
        chaos_harness.summary_lines.append(f"nemo-gym backend: {python.describe()}")
        return start_nemo_gym_stack(
            start,
            chaos_harness.log_dir,
            python=python,
            policy_url=policy_urls,
            model=chaos_policy.model,
            link=chaos_links,
        )
    return start_gym_stack(
        start,
        chaos_harness.log_dir,
        policy_url=policy_urls,
        model=chaos_policy.model,
        eos_token_id=eos_token_id(chaos_policy.model_dir),
        link=chaos_links,
    )


@pytest.fixture(scope="session")
def chaos_stack(  # noqa: PLR0917 - pytest passes fixtures by name
    chaos_policy_replicas: tuple[PolicyServer, ...],
    chaos_gym: GymStack,
    chaos_toxiproxy: ChaosToxiproxy,
    chaos_links: ProxyLinks,
    chaos_fault_layer: FaultLayer,
    chaos_collector_policy_url: str,
    chaos_ray: HostedStart | None,
    chaos_harness: ChaosHarness,
) -> ChaosStack:
    """The whole system under test, addressed by the scenario format's server and link names."""
    from pytest_rollout_chaos.stack import ChaosStack

    if chaos_ray is not None:
        chaos_harness.summary_lines.append(chaos_ray.describe())
    return ChaosStack(
        policy=chaos_policy_replicas[0],
        replicas=chaos_policy_replicas,
        gym=chaos_gym,
        toxiproxy=chaos_toxiproxy,
        links=chaos_links.links,
        fault_layer=chaos_fault_layer,
        collector_policy_url=chaos_collector_policy_url,
    )


@pytest.fixture
def chaos_gym_reset(chaos_gym: GymStack) -> GymStack:
    """``chaos_gym`` with per-test server state reset (sessions, environment latency)."""
    chaos_gym.reset_state()
    return chaos_gym


@pytest.fixture
def chaos_stack_reset(chaos_stack: ChaosStack) -> ChaosStack:
    """``chaos_stack`` as a test expects it: servers up, no toxic, no hook rule, state reset."""
    chaos_stack.reset()
    return chaos_stack


@pytest_asyncio.fixture
async def chaos_trial(
    chaos_stack_reset: ChaosStack, chaos_history: History, chaos_settings: ChaosSettings
) -> AsyncIterator[Trial]:
    """One test's trial over the reset stack: the collector's and the faults' contexts, both over
    ``chaos_history``."""
    from pytest_rollout_chaos.trial import open_trial

    async with open_trial(chaos_stack_reset, seed=chaos_settings.seed, history=chaos_history) as trial:
        yield trial


@pytest.fixture
def chaos_collector_context(chaos_trial: Trial) -> CollectorContext:
    """What a trainer gives its collector, over the session's stack; its History is ``chaos_history``."""
    return chaos_trial.collector


@pytest_asyncio.fixture
async def chaos_faults(request: pytest.FixtureRequest, chaos_trial: Trial) -> AsyncIterator[FaultInjector]:
    """Inject faults by scenario name from Python; ``@pytest.mark.chaos_fault(kind, target, ...)``
    markers are injected before the test, and everything is healed after it. A test that passes
    with a fault that touched nothing fails, as a scenario does (``expect_hits=0`` allows it)."""
    from pytest_rollout_chaos.injector import FaultInjector

    async with FaultInjector(chaos_trial) as injector:
        request.node.stash[INJECTOR_KEY] = injector
        for marker in reversed(list(request.node.iter_markers("chaos_fault"))):
            if (reason := injector.cannot_act(*marker.args[:2])) is not None:
                pytest.skip(f"chaos_fault{marker.args[:2]!r}: {reason}")
            await injector.inject(*marker.args, **marker.kwargs)
        yield injector


@pytest.fixture
def chaos_collector(
    chaos_collector_context: CollectorContext, chaos_settings: ChaosSettings, chaos_faults: FaultInjector
) -> Collector:
    """The collector under test: ``--rollout-chaos-target``'s factory applied to the context.

    Depends on ``chaos_faults``, so a test's ``chaos_fault`` markers hold while it collects.
    """
    from pytest_rollout_chaos.collector import contract
    from pytest_rollout_chaos.collector.target import load_factory
    from pytest_rollout_chaos.errors import CollectorContractError, CollectorTargetError

    try:
        factory = load_factory(chaos_settings.target)
    except CollectorTargetError as error:
        raise pytest.UsageError(f"--rollout-chaos-target: {error}") from error
    try:
        return contract.build_collector(
            factory, chaos_collector_context, who=contract.describe(factory, chaos_settings.target)
        )
    except CollectorContractError as error:
        pytest.fail(f"{type(error).__name__}: {error}", pytrace=False)
