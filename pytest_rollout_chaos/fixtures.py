"""The public pytest fixtures: thin views over the session harness.

Every fixture that could start something depends on ``chaos_harness``, which skips the test
unless ``--rollout-chaos`` is on; so without the flag nothing is ever started.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

from pytest_rollout_chaos.harness import INJECTOR_KEY, ChaosHarness
from pytest_rollout_chaos.history import History
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.settings import ChaosSettings
from pytest_rollout_chaos.stash import (
    EXTERNAL_POLICY_KEY,
    HARNESS_KEY,
    NOT_ENABLED,
    SETTINGS_KEY,
)

if TYPE_CHECKING:
    from pytest_rollout_chaos.builder import StackBuilder
    from pytest_rollout_chaos.collector.protocol import Collector, CollectorContext
    from pytest_rollout_chaos.injector import FaultInjector
    from pytest_rollout_chaos.ray.hosted import HostedStart
    from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer
    from pytest_rollout_chaos.servers.gym.stack import GymStack
    from pytest_rollout_chaos.servers.links import ProxyLinks
    from pytest_rollout_chaos.servers.policy.spec import PolicyServer
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
def chaos_builder(
    chaos_harness: ChaosHarness,
    chaos_settings: ChaosSettings,
    pytestconfig: pytest.Config,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> StackBuilder:
    """The session's stack builder: every fixture below is a view of one of its parts, started on
    first use into the session's harness. Those that may start a server on Ray ask for
    ``chaos_ray`` first, so a cluster that cannot be had ends the run as one usage error."""
    from pytest_rollout_chaos.builder import StackBuilder, replicas_to_start

    scenarios = [scenario for item in request.session.items if (scenario := getattr(item, "scenario", None))]
    return StackBuilder(
        chaos_settings,
        chaos_harness,
        replicas=replicas_to_start(chaos_settings, scenarios),
        external_policy=pytestconfig.stash.get(EXTERNAL_POLICY_KEY, None),
        ray_dir=tmp_path_factory.mktemp("ray") if chaos_settings.ray.on else None,
    )


@pytest.fixture(scope="session")
def chaos_toxiproxy(chaos_builder: StackBuilder) -> ChaosToxiproxy:
    """The session's Toxiproxy (per --rollout-chaos-toxiproxy).

    It offers ``.server`` (kind, api_url), ``.client()`` (async) and ``.toxiproxy_python()``.
    """
    return chaos_builder.toxiproxy


@pytest.fixture(scope="session")
def chaos_ray(chaos_builder: StackBuilder) -> HostedStart | None:
    """With ``--rollout-chaos-ray``, the session's cluster (started or joined) and the ``start`` that puts
    each policy and Gym server in a Ray actor on its node; None when Ray is off. The cluster is
    closed after every server on it has stopped."""
    from pytest_rollout_chaos.ray.nodes import RayClusterError

    try:
        return chaos_builder.ray
    except RayClusterError as error:
        pytest.exit(str(error), returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture
def chaos_toxics_reset(chaos_toxiproxy: ChaosToxiproxy) -> ChaosToxiproxy:
    """The session's Toxiproxy after a reset: every proxy enabled, no toxics (per-test state)."""
    chaos_toxiproxy.reset()
    return chaos_toxiproxy


@pytest.fixture(scope="session")
def chaos_policy_replicas(
    chaos_builder: StackBuilder, chaos_ray: HostedStart | None
) -> tuple[PolicyServer, ...]:
    """The session's policy servers: ``--rollout-chaos-policy-replicas`` of them (more when a
    collected scenario asks for more with ``stack.policy.replicas`` and the model server can use
    fewer per scenario), each the tiny torch model or ``vllm serve`` (``--rollout-chaos-backend``)
    in its own process group; or the one server already running at ``--rollout-chaos-policy-url``,
    which is not started (no process)."""
    return chaos_builder.policy_replicas


@pytest.fixture(scope="session")
def chaos_policy(chaos_policy_replicas: tuple[PolicyServer, ...]) -> PolicyServer:
    """The session's (first) policy server; ``chaos_policy_replicas`` has them all."""
    return chaos_policy_replicas[0]


@pytest.fixture(scope="session")
def chaos_fault_layer(chaos_builder: StackBuilder) -> FaultLayer:
    """The session's HTTP fault layer: it records every link's traffic into the History and
    applies the semantic faults, in front of every server."""
    return chaos_builder.fault_layer


@pytest.fixture(scope="session")
def chaos_links(chaos_builder: StackBuilder, chaos_ray: HostedStart | None) -> ProxyLinks:
    """One fault-layer listener and one Toxiproxy proxy per link of the stack, created as it starts;
    the proxies listen where every server reaches them (loopback, or this machine's address in a
    Ray cluster with nodes on other machines)."""
    return chaos_builder.links


@pytest.fixture(scope="session")
def chaos_collector_policy_url(chaos_builder: StackBuilder, chaos_ray: HostedStart | None) -> str:
    """The policy's OpenAI base URL as the collector reaches it: through the ``collector->policy`` link
    (to the first replica, ``collector->policy[0]``, when there are several)."""
    return chaos_builder.collector_policy_url


@pytest.fixture(scope="session")
def chaos_gym(chaos_builder: StackBuilder, chaos_ray: HostedStart | None) -> GymStack:
    """The Gym stack (resources, model, two agents, head) in front of the session's policy.

    ``--rollout-chaos-gym`` picks our embedded servers or real NeMo Gym servers (with our
    environment server beside them as ``ctx.env``, for native-style collectors). Every link
    between servers, and from the collector to them, goes through a Toxiproxy proxy.
    """
    return chaos_builder.gym


@pytest.fixture(scope="session")
def chaos_stack(chaos_builder: StackBuilder, chaos_ray: HostedStart | None) -> ChaosStack:
    """The whole system under test, addressed by the scenario format's server and link names."""
    return chaos_builder.stack


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
