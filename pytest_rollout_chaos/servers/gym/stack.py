"""ServerSpecs for a whole embedded Gym stack, its start order, and the ``GymStack`` view.

Start order follows the links: resources server, model server (needs the policy), agents
(need model and resources), head server (needs the agents). Every link between servers goes
through ``link(name, upstream_url) -> url``: identity by default; the faults layer passes a
callback that puts a proxy in front of the upstream and returns the proxy's address. Link
names: ``model->policy`` (``model->policy[i]`` per policy replica), ``agent->model``,
``agent->resources``, ``collector->resources`` and ``collector->agent:<agent instance>`` (one per
agent, since each has its own upstream).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.history import EVENTS_FILE_ENV
from pytest_rollout_chaos.servers import readiness
from pytest_rollout_chaos.servers.gym import head, tasks
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec

Link = Callable[[str, str], str]
StartServer = Callable[[ServerSpec], ManagedProcess]

MODEL_TO_POLICY: Final = "model->policy"
AGENT_TO_MODEL: Final = "agent->model"
AGENT_TO_RESOURCES: Final = "agent->resources"
COLLECTOR_TO_RESOURCES: Final = "collector->resources"
COLLECTOR_TO_AGENT: Final = "collector->agent"

RESOURCES_NAME: Final = "gym_resources"
MODEL_NAME: Final = "gym_model"
HEAD_NAME: Final = "gym_head"
DEFAULT_AGENTS: Final = ("calculator_agent", "echo_agent")
MAX_OUTPUT_TOKENS: Final = 64
"""The token limit of a model call whose row sets no ``max_output_tokens`` (the model server's)."""
_PACKAGE: Final = "pytest_rollout_chaos.servers.gym"


PolicyURLs = str | Mapping[str, str]  # one policy's URL, or each replica's by name (``policy[0]``: URL)


def policy_links(link: Link, policy_url: PolicyURLs) -> list[str]:
    """The policy replicas' URLs as the model server reaches them: one ``model->NAME`` link each."""
    urls = {"policy": policy_url} if isinstance(policy_url, str) else policy_url
    if not urls:
        raise ValueError("the model server needs at least one policy URL")
    return [link(f"model->{name}", url) for name, url in urls.items()]


def direct_link(_name: str, upstream_url: str) -> str:
    """No proxy: clients talk to the upstream itself."""
    return upstream_url


def collector_agent_link(agent: str) -> str:
    """The link name for the collector's path to one agent instance."""
    return f"{COLLECTOR_TO_AGENT}:{agent}"


def _spec(name: str, module: str, args: Sequence[str], log_dir: Path, hint: str) -> ServerSpec:
    return ServerSpec(
        name=name,
        argv=(sys.executable, "-m", f"{_PACKAGE}.{module}", *args),
        probe=readiness.all_of(readiness.address_known(), readiness.http_ok("/health")),
        env={EVENTS_FILE_ENV: str(events_file(log_dir, name))},
        ready_timeout_s=30.0,
        hint=hint,
    )


def events_file(log_dir: Path, name: str) -> Path:
    """Where server ``name`` writes its History events."""
    return log_dir / f"{name}.events.jsonl"


def resources_spec(
    log_dir: Path,
    *,
    name: str = RESOURCES_NAME,
    step_latency_ms: float = 0.0,
    step_item_latency_ms: float = 0.0,
) -> ServerSpec:
    """The resources server (tasks, tools, /verify, /step_batch)."""
    args = ("--step-latency-ms", str(step_latency_ms), "--step-item-latency-ms", str(step_item_latency_ms))
    return _spec(name, "resources", args, log_dir, "see the resources server log above")


def model_spec(
    log_dir: Path,
    *,
    policy_url: str | Sequence[str],
    model: str,
    eos_token_id: int | None,
    splice: bool = True,
    name: str = MODEL_NAME,
    default_max_tokens: int = MAX_OUTPUT_TOKENS,
) -> ServerSpec:
    """The Gym model server in front of the policy (or its replicas, which it spreads its calls
    over); ``splice=False`` is vanilla vLLM behaviour."""
    urls = [policy_url] if isinstance(policy_url, str) else list(policy_url)
    args = [arg for url in urls for arg in ("--policy-url", url)]
    args += ["--model", model, "--default-max-tokens", str(default_max_tokens)]
    if eos_token_id is not None:
        args += ["--eos-token-id", str(eos_token_id)]
    if not splice:
        args.append("--no-splice")
    return _spec(name, "model_server", args, log_dir, "is the policy server up at --policy-url?")


def agent_spec(
    log_dir: Path, *, name: str, model_url: str, resources_url: str, max_steps: int = 8
) -> ServerSpec:
    """One simple-agent instance."""
    args = (
        "--name",
        name,
        "--model-url",
        model_url,
        "--resources-url",
        resources_url,
        "--max-steps",
        str(max_steps),
    )
    return _spec(name, "agent", args, log_dir, "see the agent log above")


def head_spec(
    log_dir: Path, *, config_file: Path, config: str | None = None, name: str = HEAD_NAME
) -> ServerSpec:
    """The head server answering ``/global_config_dict_yaml`` from ``config_file``; ``config``, when
    given, is that file's text, written where the head starts (on its node, with Ray)."""
    spec = _spec(name, "head", ("--config-file", str(config_file)), log_dir, "see the head server log above")
    return spec if config is None else dataclasses.replace(spec, files={config_file: config})


def eos_token_id(model_dir: Path) -> int:
    """The end-of-turn token id of a model directory (HF layout)."""
    for name in ("generation_config.json", "config.json"):
        path = model_dir / name
        if path.exists():
            value = json.loads(path.read_text()).get("eos_token_id")
            if isinstance(value, list) and value:
                value = value[0]
            if isinstance(value, int):
                return value
    tokenizer_config = model_dir / "tokenizer_config.json"
    tokenizer_file = model_dir / "tokenizer.json"
    if tokenizer_config.exists() and tokenizer_file.exists():
        from tokenizers import Tokenizer

        eos = json.loads(tokenizer_config.read_text()).get("eos_token")
        eos_text = eos.get("content") if isinstance(eos, dict) else eos
        token = Tokenizer.from_file(str(tokenizer_file)).token_to_id(str(eos_text))
        if isinstance(token, int):
            return token
    raise ValueError(
        f"cannot find the EOS token id in {model_dir}: expected eos_token_id in generation_config.json or "
        "config.json, or eos_token in tokenizer_config.json with a tokenizer.json"
    )


@dataclass(frozen=True, slots=True)
class GymStack:
    """A running embedded Gym stack: addresses (as clients should use them) and processes."""

    head_url: str
    agents: Mapping[str, str]
    model_url: str
    resources_url: str
    processes: Mapping[str, ManagedProcess]
    events_files: list[Path]
    datasets_dir: Path = field(default_factory=lambda: bundled.fixtures_dir() / "datasets")
    control_timeout_s: float = 5.0
    real_servers: frozenset[str] = frozenset()  # process names of servers this project did not write

    def rows(self, task: str, n: int) -> list[dict[str, Any]]:
        """``n`` NeMo Gym rows of ``task`` from the datasets, ``_rowidx`` 0..n-1 (cycling if needed)."""
        if task not in tasks.TASKS:
            raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(tasks.TASKS)}")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        path = self.datasets_dir / f"{task}.jsonl"
        source = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not source:
            raise ValueError(f"dataset {path} is empty; regenerate it with fixtures/make_datasets.py")
        chosen = []
        for index in range(n):
            row = copy.deepcopy(source[index % len(source)])
            row["_rowidx"] = index
            chosen.append(row)
        return chosen

    def reset_state(self) -> None:
        """Reset per-test server state (resources sessions and latency, model splicing), directly."""
        self._control(RESOURCES_NAME, "/_gym/reset", {})
        self._control(MODEL_NAME, "/_gym/reset", {})

    def set_env_latency(self, *, per_call_ms: float, per_item_ms: float) -> None:
        """Set the ``/step_batch`` cost (per call and per item) until the next reset."""
        self._control(
            RESOURCES_NAME, "/_gym/latency", {"per_call_ms": per_call_ms, "per_item_ms": per_item_ms}
        )

    def use_policy_replicas(self, count: int) -> None:
        """Spread model calls over the first ``count`` policy replicas until the next reset."""
        self._control(MODEL_NAME, "/_gym/replicas", {"count": count})

    def set_splice(self, enabled: bool) -> None:
        """Splice earlier turns' token ids (on) or re-render them (off, vanilla) until the next reset."""
        self._control(MODEL_NAME, "/_gym/splice", {"enabled": enabled})

    def set_model_extra_body(self, extra_body: Mapping[str, Any]) -> None:
        """Merge ``extra_body`` into every generation request of the model server until the next reset."""
        self._control(MODEL_NAME, "/_gym/extra_body", {"extra_body": dict(extra_body)})

    def set_stop(self, stop: Sequence[str]) -> None:
        """Stop every generation of the model server at ``stop`` until the next reset, the stop string
        kept in the text, or the agent could not parse the tool call it closes."""
        self.set_model_extra_body({"stop": list(stop), "include_stop_str_in_output": True})

    def set_rescore_bonus(self, bonus: float) -> None:
        """Score each row ``bonus`` higher each time it is scored again, until the next reset."""
        self._control(RESOURCES_NAME, "/_gym/rescore", {"bonus": bonus})

    def set_reward_spread(self, spread: float) -> None:
        """Score each row ``spread`` times ``_rowidx mod 4`` higher, until the next reset."""
        self._control(RESOURCES_NAME, "/_gym/spread", {"spread": spread})

    def _control(self, server: str, path: str, body: Mapping[str, Any]) -> None:
        """POST a test control to ``server`` itself, not through its proxy."""
        request = urllib.request.Request(
            self.processes[server].url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=self.control_timeout_s) as response:
            response.read()


def start_gym_stack(
    start: StartServer,
    log_dir: Path,
    *,
    policy_url: PolicyURLs,
    model: str,
    eos_token_id: int | None,
    link: Link = direct_link,
    splice: bool = True,
    agents: Sequence[str] = DEFAULT_AGENTS,
    max_steps: int = 8,
    step_latency_ms: float = 0.0,
    step_item_latency_ms: float = 0.0,
) -> GymStack:
    """Start every Gym server in order with ``start`` (which owns stopping them) and describe them."""
    if len(set(agents)) != len(agents) or not agents:
        raise ValueError(f"agents must be distinct instance names, at least one; got {list(agents)}")
    log_dir.mkdir(parents=True, exist_ok=True)
    processes: dict[str, ManagedProcess] = {}
    resources = start(
        resources_spec(log_dir, step_latency_ms=step_latency_ms, step_item_latency_ms=step_item_latency_ms)
    )
    processes[RESOURCES_NAME] = resources
    model_process = start(
        model_spec(
            log_dir,
            policy_url=policy_links(link, policy_url),
            model=model,
            eos_token_id=eos_token_id,
            splice=splice,
        )
    )
    processes[MODEL_NAME] = model_process
    model_url = link(AGENT_TO_MODEL, model_process.url)
    resources_url = link(AGENT_TO_RESOURCES, resources.url)
    agent_urls: dict[str, str] = {}
    for agent in agents:
        process = start(
            agent_spec(
                log_dir, name=agent, model_url=model_url, resources_url=resources_url, max_steps=max_steps
            )
        )
        processes[agent] = process
        agent_urls[agent] = link(collector_agent_link(agent), process.url)
    config = head.global_config(
        agents={name: (url, RESOURCES_NAME, MODEL_NAME) for name, url in agent_urls.items()},
        model=(MODEL_NAME, model_url),
        resources=(RESOURCES_NAME, resources_url),
    )
    config_file = log_dir / "gym_global_config.json"
    head_process = start(head_spec(log_dir, config_file=config_file, config=json.dumps(config, indent=2)))
    processes[HEAD_NAME] = head_process
    return GymStack(
        head_url=head_process.url,
        agents=agent_urls,
        model_url=model_process.url,
        resources_url=link(COLLECTOR_TO_RESOURCES, resources.url),
        processes=processes,
        events_files=[events_file(log_dir, name) for name in processes],
    )
