"""Our protocol against real NeMo Gym, both ways, over real processes and HTTP.

* NeMo Gym's own ``RolloutCollectionHelper.run_examples``, run as the ``nemo_gym`` target runs
  it (``servers/nemo_gym/rollouts.py``), drives our embedded agents through
  our head server (from 0.5 on, through real ``legacy_agent`` environment servers in front of
  them, as that version's helper dispatches only through environment servers), and every
  ``/run`` result validates against NeMo Gym's pydantic models;
* the same helper drives the nemo-gym backend's real servers through the head config it serves;
* NeMo Gym's own ``vllm_model`` (token-id mode) and ``simple_agent`` work against our tiny
  policy server, and grade ``echo`` rows exactly as the embedded stack does;
* the backend's environment (``CollectorContext.env``) answers batched steps, with latency.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_rollout_chaos.collector.adapters.nemo_gym import PROGRAM as ROLLOUTS
from pytest_rollout_chaos.collector.environment import GymEnvironment
from pytest_rollout_chaos.servers.gym import tasks
from pytest_rollout_chaos.servers.gym.stack import (
    MODEL_NAME,
    GymStack,
    eos_token_id,
    head_spec,
    start_gym_stack,
)
from pytest_rollout_chaos.servers.nemo_gym import config as gym_config
from pytest_rollout_chaos.servers.nemo_gym.locate import GymPython
from pytest_rollout_chaos.servers.nemo_gym.stack import (
    ENV_NAME,
    NemoGymStack,
    nemo_gym_spec,
    start_nemo_gym_stack,
)
from pytest_rollout_chaos.servers.policy.spec import PolicyServer
from pytest_rollout_chaos.servers.ports import free_ports
from pytest_rollout_chaos.servers.process import ManagedProcess, ServerSpec
from tests.nemo_gym.conftest import run_program, started

pytestmark = pytest.mark.slow  # starts the policy and NeMo Gym servers

TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def embedded_gym_head(
    gym_python: GymPython, chaos_policy: PolicyServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GymStack, str]]:
    """The embedded stack, and the head URL NeMo Gym's own helper should use to reach it."""
    log_dir = tmp_path_factory.mktemp("embedded-gym")
    with started(log_dir) as start:
        gym = start_gym_stack(
            start,
            log_dir,
            policy_url=chaos_policy.url,
            model=chaos_policy.model,
            eos_token_id=eos_token_id(chaos_policy.model_dir),
        )
        if gym_python.environment_relay:
            yield gym, _relayed_head(start, log_dir, gym, gym_python)
        else:
            yield gym, gym.head_url


def _relayed_head(
    start: Callable[[ServerSpec], ManagedProcess], log_dir: Path, gym: GymStack, python: GymPython
) -> str:
    """A real ``legacy_agent`` environment server in front of each embedded agent, and a head
    server whose config is the embedded one plus those environment servers."""
    with urllib.request.urlopen(gym.head_url + "/global_config_dict_yaml", timeout=TIMEOUT_S) as answer:
        config = yaml.safe_load(json.loads(answer.read()))
    relays = [gym_config.relay_instance(agent) for agent in gym.agents]
    ports = dict(zip((relay.name for relay in relays), free_ports(len(relays)), strict=True))
    addresses = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    for relay in relays:
        # A real server reads dry_run from its config; the embedded head's config has none.
        view = {**config, "dry_run": False, **gym_config.instance_entries([relay], addresses)}
        start(nemo_gym_spec(relay, python=python.path, port=ports[relay.name], config=view, log_dir=log_dir))
    config_file = log_dir / "relayed_global_config.json"
    config_file.write_text(json.dumps({**config, **gym_config.instance_entries(relays, addresses)}))
    return start(head_spec(log_dir, config_file=config_file, name="relayed_head")).url


@pytest.fixture(scope="module")
def real_gym(
    gym_python: GymPython, chaos_policy: PolicyServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NemoGymStack]:
    log_dir = tmp_path_factory.mktemp("real-gym")
    with started(log_dir) as start:
        yield start_nemo_gym_stack(
            start, log_dir, python=gym_python, policy_url=chaos_policy.url, model=chaos_policy.model
        )


def _rows(gym: GymStack, per_task: int) -> list[dict[str, Any]]:
    rows = [*gym.rows("calculator", per_task), *gym.rows("echo", per_task)]
    return [{**row, "_rowidx": index} for index, row in enumerate(rows)]


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return json.loads(response.read())


def _helper_run(python: GymPython, head_url: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """NeMo Gym's own collection of ``rows``, as the ``nemo_gym`` target runs it, its results validated."""
    request = {
        "program": str(ROLLOUTS),
        "head": gym_config.host_port(head_url),
        "rows": rows,
        "timeout_s": TIMEOUT_S,
    }
    return run_program(python, "helper_run.py", request, timeout_s=TIMEOUT_S * 2)


def test_real_helper_drives_embedded_agents_and_results_validate(
    gym_python: GymPython, embedded_gym_head: tuple[GymStack, str]
) -> None:
    embedded_gym, head_url = embedded_gym_head
    rows = _rows(embedded_gym, 3)
    answer = _helper_run(gym_python, head_url, rows)
    assert answer["failed"] == []
    assert answer["invalid"] == [], "our /run results do not validate against NeMo Gym's models"
    results = answer["results"]
    assert sorted(item["result"]["_rowidx"] for item in results) == list(range(len(rows)))
    for item in results:
        result = item["result"]
        assert isinstance(result["reward"], float)
        assert result["task"] == item["row"]["task"]
        with_tokens = [o for o in result["response"]["output"] if o.get("generation_token_ids")]
        assert with_tokens, f"row {result['_rowidx']}: no output item carries token ids"
        for output in with_tokens:
            assert len(output["generation_token_ids"]) == len(output["generation_log_probs"])
            assert output["prompt_token_ids"]


def test_real_helper_drives_the_nemo_gym_backend_through_its_head(
    gym_python: GymPython, real_gym: NemoGymStack
) -> None:
    rows = _rows(real_gym, 2)
    answer = _helper_run(gym_python, real_gym.head_url, rows)
    assert answer["failed"] == []
    assert answer["invalid"] == []
    assert sorted(item["result"]["_rowidx"] for item in answer["results"]) == list(range(len(rows)))


def test_real_vllm_model_serves_token_ids_from_the_tiny_policy(
    real_gym: NemoGymStack, chaos_policy: PolicyServer
) -> None:
    text = "Repeat exactly: apple"
    body = {"input": [{"role": "user", "content": text}], "temperature": 0.0}
    response = _post(real_gym.processes[MODEL_NAME].url + "/v1/responses", body)
    message = response["output"][-1]
    assert message["type"] == "message"
    generation = message["generation_token_ids"]
    log_probs = message["generation_log_probs"]
    assert generation
    assert len(generation) == len(log_probs)
    assert all(isinstance(token, int) for token in generation)
    assert all(math.isfinite(value) and value <= 0.0 for value in log_probs)
    tokenized = _post(
        chaos_policy.url + "/tokenize",
        {"model": chaos_policy.model, "messages": [{"role": "user", "content": text}]},
    )
    assert message["prompt_token_ids"] == tokenized["tokens"]


def test_real_agents_grade_echo_rows_like_the_embedded_stack(real_gym: NemoGymStack) -> None:
    rows = real_gym.rows("echo", 4)
    for row in rows:
        row["responses_create_params"] = {**row["responses_create_params"], "temperature": 0.0}
        result = _post(real_gym.agents[row["agent_ref"]["name"]] + "/run", row)
        embedded = tasks.verify_answer(row, tasks.final_text(result["response"]))
        assert result["reward"] == embedded.reward, (row["word"], tasks.final_text(result["response"]))
        assert result["_rowidx"] == row["_rowidx"]


def test_real_stack_has_the_embedded_shape(real_gym: NemoGymStack, gym_python: GymPython) -> None:
    agents = {"calculator_agent", "echo_agent"}
    relays = {gym_config.relay_name(agent) for agent in agents} if gym_python.environment_relay else set()
    assert set(real_gym.agents) == agents
    assert set(real_gym.relays.values()) == relays
    assert real_gym.real_servers == {"gym_model", "gym_resources", *agents, *relays}
    assert ENV_NAME in real_gym.processes
    assert ENV_NAME not in real_gym.real_servers
    with urllib.request.urlopen(real_gym.head_url + "/global_config_dict_yaml", timeout=TIMEOUT_S) as answer:
        config = yaml.safe_load(json.loads(answer.read()))
    agent = config["calculator_agent"]["responses_api_agents"]["simple_agent"]
    assert f"http://{agent['host']}:{agent['port']}" == real_gym.agents["calculator_agent"]
    for name, relay in real_gym.relays.items():
        relayed = config[relay]["environment_servers"]["legacy_agent"]
        assert relayed["agent_server"] == {"type": "responses_api_agents", "name": name}
        assert f"http://{relayed['host']}:{relayed['port']}" == real_gym.agents[name]
    real_gym.reset_state()


def test_the_backend_environment_steps_batches_with_latency(real_gym: NemoGymStack) -> None:
    rows = real_gym.rows("echo", 4)
    logs = [[{"role": "user", "content": "x"}, {"role": "assistant", "content": row["word"]}] for row in rows]

    async def step() -> tuple[list[float], float]:
        async with GymEnvironment(real_gym.resources_url, request_timeout_s=TIMEOUT_S) as env:
            started_at = time.monotonic()
            answer = await env.step(logs, rows)
            return answer.rewards, time.monotonic() - started_at

    rewards, fast_s = asyncio.run(step())
    assert rewards == [1.0] * len(rows), "the environment grades echo rows like the embedded stack"
    real_gym.set_env_latency(per_call_ms=600, per_item_ms=100)
    try:
        _, slow_s = asyncio.run(step())
    finally:
        real_gym.reset_state()
    assert slow_s >= 1.0 > fast_s, (fast_s, slow_s)
