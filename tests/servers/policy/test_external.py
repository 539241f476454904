"""An external policy (``--rollout-chaos-policy-url``), the pure parts: the served model, the one
readiness deadline, and which scenarios and faults cannot act on a server this run did not start."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.engine.fit import not_applicable, why_not
from pytest_rollout_chaos.errors import FaultError
from pytest_rollout_chaos.faults import registry
from pytest_rollout_chaos.faults.base import Need
from pytest_rollout_chaos.injector import FaultInjector
from pytest_rollout_chaos.scenario.model import load_scenario
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer
from pytest_rollout_chaos.servers.gym.stack import (
    DEFAULT_AGENTS,
    HEAD_NAME,
    MODEL_NAME,
    RESOURCES_NAME,
    GymStack,
)
from pytest_rollout_chaos.servers.policy.external import ExternalPolicyError, connect, model_ids, served_model
from pytest_rollout_chaos.servers.policy.spec import PolicyServer
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.stack import ChaosStack
from pytest_rollout_chaos.trial import open_trial

URL = "http://10.1.2.3:8000"
REASON = (
    f"the policy is an external server (--rollout-chaos-policy-url={URL}/v1), "
    "which this run did not start and cannot signal"
)
# catalog scenarios that need the policy's process, and what their skip says
NEEDS_THE_POLICY_PROCESS = {
    "policy-not-ready-at-start": f"stack.policy.ready_delay_s=1 stops and restarts the policy: {REASON}",
    "native-policy-killed": "faults/0 kill on 'policy': the policy is an external server "
    "(--rollout-chaos-policy-url=http://10.1.2.3:8000/v1), which this run did not start and cannot signal",
}


def _stack(tmp_path: Path, *, external: bool) -> ChaosStack:
    """A ChaosStack of processes that are never started: only names are read."""

    def process(name: str, port: int) -> ManagedProcess:
        return ManagedProcess(ServerSpec(name, ("true",), readiness.address_known(), port=port), tmp_path)

    names = (MODEL_NAME, RESOURCES_NAME, HEAD_NAME, *DEFAULT_AGENTS)
    gym = GymStack(
        head_url="http://127.0.0.1:1",
        agents={agent: "http://127.0.0.1:2" for agent in DEFAULT_AGENTS},
        model_url="http://127.0.0.1:3",
        resources_url="http://127.0.0.1:4",
        processes={name: process(name, 20000 + index) for index, name in enumerate(names)},
        events_files=[],
    )
    model_dir = bundled.tiny_model_dir()
    if external:
        policy = PolicyServer.external(URL + "/v1", model="m", model_dir=model_dir)
    else:
        policy = PolicyServer.of(process("policy", 19999), model="m", model_dir=model_dir, backend="tiny")
    return ChaosStack(
        policy=policy,
        gym=gym,
        toxiproxy=None,
        links={},
        fault_layer=FaultLayer("http://127.0.0.1:5", tmp_path / "fault_layer.events.jsonl"),
        collector_policy_url="http://127.0.0.1:6/v1",
    )


def _scenario(tmp_path: Path, faults: str) -> Path:
    path = tmp_path / "x.chaos.yaml"
    path.write_text(
        f"name: x\ndescription: d\nworkload: {{tasks: [echo]}}\nfaults:\n{faults}"
        "expect: {invariants: [accounted], within_s: 5}\n"
    )
    return path


# -- the served model -----------------------------------------------------------------------------
def test_the_first_listed_model_is_served_unless_one_names_the_model_directory() -> None:
    model_dir = Path("/models/my-model")
    assert served_model(["a", "b"], model_dir) == "a"
    assert served_model(["a", "org/my-model"], model_dir) == "org/my-model"
    assert served_model(["a", "/models/my-model"], model_dir) == "/models/my-model"


def test_model_ids_reads_an_openai_model_list() -> None:
    assert model_ids({"object": "list", "data": [{"id": "x"}, {"id": "y"}, {"object": "model"}]}) == [
        "x",
        "y",
    ]
    with pytest.raises(TypeError, match="expected"):
        model_ids({"models": ["x"]})


def test_an_external_policy_has_no_process_and_says_why() -> None:
    policy = PolicyServer.external(URL + "/v1/", model="m", model_dir=bundled.tiny_model_dir())
    assert (policy.process, policy.url, policy.base_url, policy.backend) == (
        None,
        URL,
        URL + "/v1",
        "external",
    )
    assert policy.unmanaged_reason() == REASON
    assert policy.events_files() == []


# -- readiness: one deadline ----------------------------------------------------------------------
@contextlib.contextmanager
def _refusing_port() -> Iterator[int]:
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connects are refused
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


def test_one_deadline_covers_every_poll() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with _refusing_port() as port, pytest.raises(ExternalPolicyError) as raised:
        connect(
            f"http://127.0.0.1:{port}/v1",
            model_dir=bundled.tiny_model_dir(),
            timeout_s=2.0,
            clock=lambda: now[0],
            sleep=sleep,
        )
    message = str(raised.value)
    assert message.startswith(f"nothing answered at http://127.0.0.1:{port} within 2.0s (limit 2s; ")
    assert (
        "tried GET /health, then GET /v1/models, 9 times; last: GET /health: ConnectionRefusedError"
        in message
    )
    assert now[0] == pytest.approx(2.0)


# -- what cannot act on it --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path", sorted(bundled.catalog_dir().glob("*.chaos.yaml")), ids=lambda path: path.name
)
def test_catalog_scenarios_skip_only_where_they_need_the_policy_process(path: Path, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    if any(registry.fault_class(step.kind).family == "ray" for step in scenario.faults):  # and no Ray here
        between_hosts = any(Need.HOST in registry.fault_class(step.kind).needs for step in scenario.faults)
        mode = "hosts:N" if between_hosts else "local:N"
        for external in (True, False):
            reason = not_applicable(scenario, _stack(tmp_path, external=external))
            assert reason is not None
            if (scenario.stack.policy.replicas or 1) > 1:  # its replicas are missing first
                assert "this stack runs 1 policy replica(s)" in reason
            else:
                assert f"does not run in a Ray actor in this run (pass --rollout-chaos-ray={mode})" in reason
        return
    if (scenario.stack.policy.replicas or 1) > 1:  # skipped for want of replicas before any fault
        outside, ours = (_stack(tmp_path, external=flag) for flag in (True, False))
        assert "and only it" in (why_not(scenario, outside, object, run_replicas=1) or "")
        assert "this run started 1" in (why_not(scenario, ours, object, run_replicas=1) or "")
        return
    expected = NEEDS_THE_POLICY_PROCESS.get(scenario.name)
    assert not_applicable(scenario, _stack(tmp_path, external=True)) == expected
    assert not_applicable(scenario, _stack(tmp_path, external=False)) is None


@pytest.mark.parametrize("kind", ["kill", "oom", "freeze", "exit_zero", "restart"])
def test_a_process_fault_on_an_external_policy_skips_the_scenario(kind: str, tmp_path: Path) -> None:
    faults = (
        f"  - {{kind: latency, target: agent->model, latency_ms: 5}}\n  - {{kind: {kind}, target: policy}}\n"
    )
    scenario = load_scenario(_scenario(tmp_path, faults))
    assert (
        not_applicable(scenario, _stack(tmp_path, external=True)) == f"faults/1 {kind} on 'policy': {REASON}"
    )
    assert not_applicable(scenario, _stack(tmp_path, external=False)) is None


@pytest.mark.asyncio
async def test_faults_by_name_refuse_process_faults_on_an_external_policy(tmp_path: Path) -> None:
    external = _stack(tmp_path, external=True)
    assert "policy" not in external.servers()
    assert external.unmanaged() == {"policy": REASON}
    assert "policy" in _stack(tmp_path, external=False).servers()
    async with open_trial(external) as trial:
        injector = FaultInjector(trial)
        assert injector.cannot_act("kill", "policy") == REASON
        assert injector.cannot_act("http_error", "policy") is None  # the fault layer acts on its answers
        assert injector.cannot_act("kill", "agent") is None
        with pytest.raises(FaultError, match=r"^target 'policy': the policy is an external server"):
            trial.faults.process("policy")
