"""One seam builds a trial: ``trial.open_trial`` is the only place the two contexts are wired.

The collector's ``CollectorContext`` and the faults' ``FaultContext`` must share one History
that follows every server's events file; copies of that wiring drifted (a benchmark's History
missed the policy's events). The scan keeps any other module from building either context, or
from calling ``collector_context`` itself. A few tests build bare contexts on purpose, each over
something that is not a stack at all (a fake Gym, a stdlib server, a hand-written Toxiproxy):
they are listed in ``BARE_ON_PURPOSE`` with the reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

import pytest_rollout_chaos
from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.history import EVENTS_FILE_ENV, Event
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.faultlayer.spec import FaultLayer
from pytest_rollout_chaos.servers.gym.stack import (
    DEFAULT_AGENTS,
    HEAD_NAME,
    MODEL_NAME,
    RESOURCES_NAME,
    GymStack,
)
from pytest_rollout_chaos.servers.policy.spec import PolicyServer
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from pytest_rollout_chaos.stack import ChaosStack
from pytest_rollout_chaos.trial import open_trial

REPO: Final = Path(pytest_rollout_chaos.__file__).parent.parent
BUILDERS: Final = ("CollectorContext", "FaultContext", "collector_context")
SEAM: Final = {
    "pytest_rollout_chaos/trial.py": {"FaultContext", "collector_context"},
    # the one constructor of CollectorContext, called only by the seam (its clients' lifetimes)
    "pytest_rollout_chaos/collector/context.py": {"CollectorContext"},
}
BARE_ON_PURPOSE: Final = {
    # collector unit tests: a fake Gym and a recording environment, no servers
    "tests/collector/_fake_gym.py": {"CollectorContext"},
    "tests/collector/test_reference_native.py": {"CollectorContext"},
    # an adapter's pieces (generation, env handles, the Ray seam) against a fake server, no stack
    "tests/collector/adapters/test_nemo_rl_validation.py": {"CollectorContext"},
    # what an adapter hands its trainer, read from its factory without collecting: no stack
    "tests/collector/adapters/_settings_context.py": {"CollectorContext"},
    # the NemoGym actor on a real Ray cluster, fed by a canned Gym client, no stack
    "tests/collector/adapters/test_nemo_rl_ray_actor.py": {"CollectorContext"},
    # the nemo_gym target against a stand-in for NeMo Gym's program, no stack
    "tests/collector/adapters/test_nemo_gym.py": {"CollectorContext"},
    # fault unit tests: each fault against a hand-written target, no stack
    "tests/faults/_netrig.py": {"FaultContext"},
    "tests/faults/_hooked.py": {"FaultContext"},
    "tests/faults/test_apply.py": {"FaultContext"},
    "tests/faults/test_short_results.py": {"FaultContext"},
    "tests/faults/test_cancel.py": {"FaultContext"},
    # the scheduler arming a start fault on a hand-written Gym client, no stack
    "tests/engine/test_schedule.py": {"FaultContext"},
    # a cancellation against the fake Gym: the fault needs only the collection it cancels
    "tests/collector/test_cancellation.py": {"FaultContext"},
    # process faults against any process: a stdlib server that is no part of a stack
    "tests/integration/faults/test_exit_zero_any_process.py": {"FaultContext"},
    "tests/integration/faults/test_oom_any_process.py": {"FaultContext"},
}
SCANNED: Final = ("pytest_rollout_chaos", "tests", "benchmarks", "fixtures")


def builds(source: str) -> Iterator[tuple[int, str]]:
    """``(line, name)`` for every call of a context builder in ``source``, under any import alias."""
    tree = ast.parse(source)
    aliases = {name: name for name in BUILDERS}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in BUILDERS:
                    aliases[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = (
            func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        )
        if called is not None and called in aliases:
            yield node.lineno, aliases[called]


def python_files() -> Iterator[Path]:
    for top in SCANNED:
        yield from sorted((REPO / top).rglob("*.py"))


def test_no_module_but_the_seam_builds_a_context() -> None:
    allowed = {**SEAM, **BARE_ON_PURPOSE}
    seen: set[str] = set()
    problems = []
    for path in python_files():
        relative = path.relative_to(REPO).as_posix()
        if relative == "tests/test_trial_seam.py":
            continue
        for line, name in builds(path.read_text(encoding="utf-8")):
            if name in allowed.get(relative, set()):
                seen.add(relative)
            else:
                problems.append(f"{relative}:{line}: {name}(...)")
    assert not problems, (
        "build both contexts with pytest_rollout_chaos.trial.open_trial(stack), so the collector and "
        "the faults share one History that follows every server:\n" + "\n".join(problems)
    )
    assert seen == set(allowed), f"stale entries (no longer build a context): {sorted(set(allowed) - seen)}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("FaultContext(history=h)\n", [(1, "FaultContext")]),
        ("x = base.FaultContext(h)\n", [(1, "FaultContext")]),
        ("from m import CollectorContext as CC\nCC(gym=g)\n", [(2, "CollectorContext")]),
        (
            "async def f():\n    async with collector_context(head_url=u):\n        pass\n",
            [(2, "collector_context")],
        ),
        ("ctx: FaultContext | None = None\nopen_trial(stack)\n", []),
    ],
    ids=["call", "attribute", "alias", "builder", "annotation-only"],
)
def test_the_scan_catches_each_way_to_build_one(source: str, expected: list[tuple[int, str]]) -> None:
    assert list(builds(source)) == expected


def _stack(tmp_path: Path) -> ChaosStack:
    """A stack of processes that are never started, whose servers' events files are real files."""

    def process(name: str, port: int, **env: str) -> ManagedProcess:
        spec = ServerSpec(name, ("true",), readiness.address_known(), port=port, env=env)
        return ManagedProcess(spec, tmp_path)

    names = (MODEL_NAME, RESOURCES_NAME, HEAD_NAME, *DEFAULT_AGENTS)
    gym = GymStack(
        head_url="http://127.0.0.1:1",
        agents={agent: "http://127.0.0.1:2" for agent in DEFAULT_AGENTS},
        model_url="http://127.0.0.1:3",
        resources_url="http://127.0.0.1:4",
        processes={name: process(name, 20000 + index) for index, name in enumerate(names)},
        events_files=[tmp_path / "agent.events.jsonl"],
    )
    policy_events = tmp_path / "policy.events.jsonl"
    policy = PolicyServer.of(
        process("policy", 19999, **{EVENTS_FILE_ENV: str(policy_events)}),
        model="m",
        model_dir=bundled.tiny_model_dir(),
        backend="tiny",
    )
    return ChaosStack(
        policy=policy,
        gym=gym,
        toxiproxy=None,
        links={},
        fault_layer=FaultLayer("http://127.0.0.1:5", tmp_path / "fault_layer.events.jsonl"),
        collector_policy_url="http://127.0.0.1:6/v1",
    )


def _write(path: Path, source: str) -> None:
    event = Event(t=1.0, source=source, kind="ok", op="POST /x", data={"row": 0})
    with path.open("a", encoding="utf-8") as handle:
        handle.write(event.to_json() + "\n")


@pytest.mark.asyncio
async def test_both_contexts_share_one_history_that_follows_every_server(tmp_path: Path) -> None:
    stack = _stack(tmp_path)
    for path in stack.events_files():
        _write(path, "before")  # events from before the trial are not this trial's
    async with open_trial(stack, seed=7) as trial:
        assert trial.collector.history is trial.history
        assert trial.faults.history is trial.history
        assert trial.faults.gym_client is trial.collector.gym
        assert trial.collector.policy == stack.collector_policy_url
        assert trial.faults.processes == stack.servers()
        assert trial.faults.fault_layer == "http://127.0.0.1:5"
        _write(tmp_path / "policy.events.jsonl", "policy")
        _write(tmp_path / "fault_layer.events.jsonl", "layer")
        _write(tmp_path / "agent.events.jsonl", "agent")
        trial.faults.history.append("fault", "info", "inject", {"kind": "latency"})
        trial.collector.history.append("collector", "invoke", "collect", {})
        sources = {event.source for event in trial.history.events()}
    assert sources == {"policy", "layer", "agent", "fault", "collector"}
