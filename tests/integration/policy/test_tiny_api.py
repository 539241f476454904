"""The tiny policy server, started once for this module, against vLLM's API shapes and token facts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.servers.policy.protocol import RESEED_ROUTE
from pytest_rollout_chaos.servers.policy.spec import tiny_policy_spec
from pytest_rollout_chaos.servers.process import ManagedProcess
from tests.integration.policy import _conformance as conformance
from tests.integration.policy._conformance import CALCULATOR_TOOL, TOKEN_FIELDS, Server, post

pytestmark = pytest.mark.slow  # starts the tiny policy server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    model_dir = bundled.tiny_model_dir()
    log_dir = tmp_path_factory.mktemp("policy")
    process = ManagedProcess(
        tiny_policy_spec(model_dir, seed=0, events_file=log_dir / "events.jsonl"), log_dir
    )
    try:
        process.start()
        yield Server(process.url, "tiny-llama", model_dir)
    finally:
        process.stop()


def test_starts_fast(server: Server, tmp_path: Path) -> None:
    process = ManagedProcess(tiny_policy_spec(bundled.tiny_model_dir(), name="policy-timed"), tmp_path)
    try:
        process.start()
        assert process.ready_after_s is not None
        assert process.ready_after_s < 5.0
    finally:
        process.stop()


def test_openai_client_chat_and_completions(server: Server) -> None:
    conformance.check_openai_client(server)


def test_tokenize_detokenize_round_trip(server: Server) -> None:
    conformance.check_tokenize_round_trip(server)


def test_tokenize_template_equals_chat_prompt_and_transformers(server: Server) -> None:
    conformance.check_template_ids_equal_chat_prompt(server)


def test_logprobs_equal_transformers_recomputation(server: Server) -> None:
    conformance.check_logprobs_match_transformers(server)


def test_same_seed_same_tokens_and_logprobs(server: Server) -> None:
    conformance.check_determinism(server)


def test_context_overflow_is_vllm_400(server: Server) -> None:
    conformance.check_context_overflow(server)
    status, payload = post(
        server.url + "/v1/chat/completions",
        {"model": server.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5000},
    )
    assert status == 400
    assert payload["error"]["message"].startswith(
        "'max_tokens' or 'max_completion_tokens' is too large: 5000."
    )


def test_bad_requests_say_what_is_valid(server: Server) -> None:
    status, payload = post(server.url + "/v1/chat/completions", {"model": "nope", "messages": []})
    assert (status, payload["error"]["type"]) == (404, "NotFoundError")
    status, payload = post(
        server.url + "/v1/chat/completions", {"model": server.model, "messages": [], "n": 1}
    )
    assert status == 400
    assert "messages" in payload["error"]["message"]
    messages = [{"role": "user", "content": "hi"}]
    status, payload = post(server.url + "/v1/chat/completions", {"messages": messages, "n": 2})
    assert status == 400
    assert "n=1" in payload["error"]["message"]
    flat = {"type": "function", "name": "calculator", "parameters": {"type": "object"}}  # Responses form
    for route in ("/v1/chat/completions", "/tokenize"):
        status, payload = post(server.url + route, {"messages": messages, "tools": [flat]})
        assert status == 400, route
        assert "tools.0.function: Field required" in payload["error"]["message"]
    status, payload = post(server.url + "/detokenize", {"tokens": [10**6]})
    assert status == 400
    assert "out of range" in payload["error"]["message"]


def test_calculator_prompt_usually_calls_the_tool(server: Server) -> None:
    finishes = [
        server.chat(
            conformance.calculator_messages(seed, "*", 4), tools=[CALCULATOR_TOOL], max_tokens=48, seed=seed
        )["choices"][0]
        for seed in range(8)
    ]
    calls = [choice for choice in finishes if choice["finish_reason"] == "tool_calls"]
    assert len(calls) >= 5, finishes
    call = calls[0]["message"]["tool_calls"][0]
    assert call["type"] == "function"
    assert call["function"]["name"] == "calculator"
    assert calls[0]["message"]["content"] is None


def test_multi_turn_retokenization_drift_happens(server: Server) -> None:
    drifts = conformance.find_drift(server, range(24))
    assert drifts, "no multi-turn conversation drifted in 24 seeds"
    _seed, prefix, template_ids = drifts[0]
    first_difference = next(i for i, (a, b) in enumerate(zip(prefix, template_ids, strict=False)) if a != b)
    assert first_difference < len(prefix)


def test_stop_strings_and_length(server: Server) -> None:
    response = server.chat(
        [{"role": "user", "content": "Hello!"}], max_tokens=3, ignore_eos=True, seed=1, **TOKEN_FIELDS
    )
    choice = response["choices"][0]
    assert choice["finish_reason"] == "length"
    assert len(choice["token_ids"]) == 3
    response = server.chat(
        [{"role": "user", "content": "Repeat exactly: tiger"}], temperature=0.0, max_tokens=20
    )
    text = response["choices"][0]["message"]["content"]
    assert text, response
    stopped = server.chat(
        [{"role": "user", "content": "Repeat exactly: tiger"}],
        temperature=0.0,
        max_tokens=20,
        stop=[text[1:3]],
    )["choices"][0]
    assert stopped["finish_reason"] == "stop"
    assert stopped["stop_reason"] == text[1:3]
    assert stopped["message"]["content"] == text[:1]


def test_health_answers_while_generating(server: Server) -> None:
    body = {"model": server.model, "prompt": "Hello", "max_tokens": 900, "ignore_eos": True}
    worker = threading.Thread(target=post, args=(server.url + "/v1/completions", body))
    worker.start()
    try:
        time.sleep(0.2)
        started = time.monotonic()
        status, _ = post(server.url + "/tokenize", {"prompt": "hi"})
        assert status == 200
        assert time.monotonic() - started < 0.5
    finally:
        worker.join(timeout=60)


def test_token_in_token_out_generate_is_vllms_shape(server: Server) -> None:
    """``/inference/v1/generate`` (what SkyRL's RemoteInferenceClient calls): the ids a chat
    completion of the same prompt generates, seed for seed, with chat-shaped logprobs."""
    messages = [{"role": "user", "content": "Repeat exactly: tiger"}]
    chat = server.chat(messages, max_tokens=8, seed=3, **TOKEN_FIELDS)
    prompt_ids = chat["prompt_token_ids"]
    sampling = {"max_tokens": 8, "seed": 3, "logprobs": 1, "min_tokens": 1, "top_k": -1, "min_p": 0.0}
    status, payload = post(
        server.url + "/inference/v1/generate",
        {"model": server.model, "token_ids": prompt_ids, "sampling_params": sampling},
    )
    assert status == 200, payload
    (choice,) = payload["choices"]
    assert choice["token_ids"] == chat["choices"][0]["token_ids"]
    assert choice["finish_reason"] == chat["choices"][0]["finish_reason"]
    logprobs = [item["logprob"] for item in choice["logprobs"]["content"]]
    assert logprobs == [item["logprob"] for item in chat["choices"][0]["logprobs"]["content"]]
    status, payload = post(
        server.url + "/inference/v1/generate",
        {"token_ids": prompt_ids, "sampling_params": {"max_tokens": 4, "top_k": 5}},
    )
    assert status == 400
    assert "top_k: 5 is not supported" in payload["error"]["message"]
    status, payload = post(server.url + "/inference/v1/generate", {"token_ids": [], "sampling_params": {}})
    assert (status, "token_ids" in payload["error"]["message"]) == (400, True)


def test_min_tokens_keeps_eos_from_ending_the_generation_early(server: Server) -> None:
    """vLLM's ``min_tokens``: EOS cannot be sampled before that many tokens (raw logprobs stay)."""
    prompt = server.chat([{"role": "user", "content": "Repeat exactly: tiger"}], max_tokens=1, **TOKEN_FIELDS)
    prompt_ids = prompt["prompt_token_ids"]
    body = {"token_ids": prompt_ids, "sampling_params": {"max_tokens": 40, "temperature": 0.0}}
    _, free = post(server.url + "/inference/v1/generate", body)
    ended = len(free["choices"][0]["token_ids"])
    assert free["choices"][0]["finish_reason"] == "stop", free
    body["sampling_params"] = {**body["sampling_params"], "min_tokens": ended + 2}
    _, held = post(server.url + "/inference/v1/generate", body)
    assert len(held["choices"][0]["token_ids"]) >= ended + 2, (free, held)


def _sampled(server: Server) -> str:
    """One unseeded, sampled completion: its text depends on the seed the server gives it."""
    body = {"model": server.model, "prompt": "Once upon a time", "max_tokens": 12, "temperature": 1.0}
    status, payload = post(server.url + "/v1/completions", body)
    assert status == 200, payload
    return str(payload["choices"][0]["text"])


def _reseed(server: Server, seed: int | None) -> None:
    status, payload = post(server.url + RESEED_ROUTE, {"seed": seed})
    assert status == 200, payload


def test_a_scenario_seed_repeats_its_samples_and_leaves_the_session_sequence_where_it_was(
    tmp_path: Path,
) -> None:
    model_dir = bundled.tiny_model_dir()
    twin = ManagedProcess(tiny_policy_spec(model_dir, name="policy-twin", seed=3), tmp_path)
    process = ManagedProcess(tiny_policy_spec(model_dir, name="policy-seeded", seed=3), tmp_path)
    try:
        twin.start()
        process.start()
        plain = Server(twin.url, "tiny-llama", model_dir)
        seeded = Server(process.url, "tiny-llama", model_dir)
        session = [_sampled(plain) for _ in range(3)]  # what the session's sequence gives, untouched
        first = _sampled(seeded)
        _reseed(seeded, 7)
        scenario = [_sampled(seeded) for _ in range(2)]
        _reseed(seeded, 7)
        assert [_sampled(seeded) for _ in range(2)] == scenario  # the same seed, the same samples
        _reseed(seeded, None)
        assert [first, _sampled(seeded), _sampled(seeded)] == session  # the session went on where it was
        assert scenario != session[1:]
    finally:
        process.stop()
        twin.stop()
