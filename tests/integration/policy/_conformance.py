"""API conformance checks shared by the tiny server tests and the real-vLLM GPU test.

Each check takes a running server (``url``, served ``model`` name, ``model_dir``) and asserts
vLLM's field shapes and the token-level facts collectors rely on.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from pytest_rollout_chaos.servers.gym.convert import tools_to_chat
from pytest_rollout_chaos.servers.gym.tasks import CALCULATOR_TOOL as TASK_CALCULATOR_TOOL

[CALCULATOR_TOOL] = tools_to_chat([TASK_CALCULATOR_TOOL])


def post(url: str, body: dict[str, Any], *, timeout_s: float = 60.0) -> tuple[int, dict[str, Any]]:
    """POST JSON; return (status, parsed body) for success and error statuses alike."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return int(error.code), json.loads(error.read())


def get(url: str, *, timeout_s: float = 30.0) -> tuple[int, dict[str, Any]]:
    """GET JSON; return (status, parsed body, or {} when it is not JSON)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            status, data = int(response.status), response.read()
    except urllib.error.HTTPError as error:
        status, data = int(error.code), error.read()
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        parsed = {}
    return status, parsed if isinstance(parsed, dict) else {"value": parsed}


@dataclass(frozen=True, slots=True)
class Server:
    url: str
    model: str
    model_dir: Path

    def chat(self, messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        body = {"model": self.model, "messages": messages, **fields}
        status, payload = post(self.url + "/v1/chat/completions", body)
        assert status == 200, payload
        return payload

    def tokenize(self, **fields: Any) -> list[int]:
        status, payload = post(self.url + "/tokenize", {"model": self.model, **fields})
        assert status == 200, payload
        assert payload["count"] == len(payload["tokens"])
        return list(payload["tokens"])


def calculator_messages(a: int = 12, op: str = "+", b: int = 7) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"What is {a} {op} {b}?"}]


TOKEN_FIELDS: dict[str, Any] = {
    "logprobs": True,
    "return_tokens_as_token_ids": True,
    "return_token_ids": True,
}


def check_openai_client(server: Server) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    try:
        models = client.models.list()
        assert [card.id for card in models.data] == [server.model]
        chat = client.chat.completions.create(
            model=server.model,
            messages=[{"role": "user", "content": "What is 3 + 4?"}],
            tools=[CALCULATOR_TOOL],  # type: ignore[list-item]
            max_tokens=48,
            temperature=1.0,
            seed=1,
            logprobs=True,
            top_logprobs=2,
        )
        choice = chat.choices[0]
        assert choice.finish_reason in ("stop", "length", "tool_calls")
        assert choice.logprobs is not None
        assert choice.logprobs.content
        assert all(len(entry.top_logprobs) == 2 for entry in choice.logprobs.content)
        assert chat.usage is not None
        assert chat.usage.completion_tokens == len(choice.logprobs.content)
        completion = client.completions.create(
            model=server.model, prompt="Repeat exactly: river", max_tokens=5, logprobs=1, seed=3
        )
        assert completion.choices[0].logprobs is not None
        assert len(completion.choices[0].logprobs.tokens or []) == completion.usage.completion_tokens  # type: ignore[union-attr]
    finally:
        client.close()


def check_tokenize_round_trip(server: Server) -> None:
    text = "<|im_start|>user\nWhat is 41 * 2? wörld 🙂<|im_end|>\n"
    ids = server.tokenize(prompt=text, add_special_tokens=False)
    status, payload = post(server.url + "/detokenize", {"model": server.model, "tokens": ids})
    assert status == 200, payload
    assert payload["prompt"] == text


def check_template_ids_equal_chat_prompt(server: Server) -> None:
    messages = calculator_messages()
    template_ids = server.tokenize(messages=messages, tools=[CALCULATOR_TOOL], add_generation_prompt=True)
    response = server.chat(messages, tools=[CALCULATOR_TOOL], max_tokens=4, seed=0, **TOKEN_FIELDS)
    assert response["prompt_token_ids"] == template_ids
    reference = AutoTokenizer.from_pretrained(str(server.model_dir))
    hf_ids = reference.apply_chat_template(
        messages, tools=[CALCULATOR_TOOL], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert list(hf_ids) == template_ids


def generated(response: dict[str, Any]) -> tuple[list[int], list[int], list[float]]:
    """(prompt ids, generated ids, logprobs) of a chat response made with ``TOKEN_FIELDS``."""
    choice = response["choices"][0]
    content = choice["logprobs"]["content"]
    ids = [int(entry["token"].removeprefix("token_id:")) for entry in content]
    assert ids == choice["token_ids"]
    return response["prompt_token_ids"], ids, [float(entry["logprob"]) for entry in content]


def check_logprobs_match_transformers(server: Server) -> None:
    response = server.chat(
        calculator_messages(5, "*", 9),
        tools=[CALCULATOR_TOOL],
        max_tokens=40,
        seed=7,
        temperature=0.7,
        top_p=0.9,
        **TOKEN_FIELDS,
    )
    prompt_ids, ids, logprobs = generated(response)
    assert ids
    assert all(math.isfinite(value) for value in logprobs)
    model = AutoModelForCausalLM.from_pretrained(str(server.model_dir), dtype=torch.float32)
    model.eval()  # type: ignore[no-untyped-call]
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + ids])).logits[0].float()
    recomputed = torch.log_softmax(logits, dim=-1)[len(prompt_ids) - 1 : -1].gather(
        1, torch.tensor(ids)[:, None]
    )
    assert torch.allclose(recomputed[:, 0], torch.tensor(logprobs), atol=1e-4), (recomputed[:, 0], logprobs)


def check_determinism(server: Server) -> None:
    def run(seed: int) -> tuple[list[int], list[float]]:
        response = server.chat(
            calculator_messages(), tools=[CALCULATOR_TOOL], max_tokens=32, seed=seed, **TOKEN_FIELDS
        )
        _, ids, logprobs = generated(response)
        return ids, logprobs

    first, second = run(11), run(11)
    assert first == second
    others = {tuple(run(seed)[0]) for seed in (12, 13, 14)}
    assert len(others | {tuple(first[0])}) > 1, "different seeds never changed the sample"


def find_drift(server: Server, seeds: range) -> list[tuple[int, list[int], list[int]]]:
    """Multi-turn calculator conversations whose re-templated prompt does not extend turn 1's tokens.

    Returns (seed, turn-1 prompt + generation ids, turn-2 template ids) for every drifting seed.
    """

    def one(seed: int) -> tuple[int, list[int], list[int]] | None:
        messages = calculator_messages(seed % 100, "+", 3)
        response = server.chat(messages, tools=[CALCULATOR_TOOL], max_tokens=48, seed=seed, **TOKEN_FIELDS)
        message = response["choices"][0]["message"]
        if not message.get("tool_calls"):
            return None
        prompt_ids, ids, _ = generated(response)
        follow_up = [
            *messages,
            {"role": "assistant", "content": message["content"], "tool_calls": message["tool_calls"]},
            {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "42"},
        ]
        template_ids = server.tokenize(
            messages=follow_up, tools=[CALCULATOR_TOOL], add_generation_prompt=True
        )
        prefix = prompt_ids + ids
        return None if template_ids[: len(prefix)] == prefix else (seed, prefix, template_ids)

    with ThreadPoolExecutor(max_workers=8) as pool:
        return [found for found in pool.map(one, seeds) if found is not None]


def check_token_id_prompt_completion(server: Server) -> None:
    """``/v1/completions`` from token ids, as the Gym model server's splice path sends it."""
    prompt = server.tokenize(messages=calculator_messages(), add_generation_prompt=True)
    body = {
        "model": server.model,
        "prompt": prompt,
        "max_tokens": 6,
        "temperature": 1.0,
        "logprobs": 1,
        "return_tokens_as_token_ids": True,
    }
    status, payload = post(server.url + "/v1/completions", body)
    assert status == 200, payload
    choice = payload["choices"][0]
    logprobs = choice["logprobs"]
    tokens = logprobs["tokens"]
    assert tokens
    assert all(token.startswith("token_id:") and token[len("token_id:") :].isdigit() for token in tokens)
    assert len(logprobs["token_logprobs"]) == len(tokens) == payload["usage"]["completion_tokens"]
    assert all(math.isfinite(value) for value in logprobs["token_logprobs"])
    assert payload["usage"]["prompt_tokens"] == len(prompt)


def check_context_overflow(server: Server) -> None:
    status, payload = post(
        server.url + "/v1/completions", {"model": server.model, "prompt": "hello " * 3000, "max_tokens": 1}
    )
    assert status == 400, payload
    assert "maximum context length" in payload["error"]["message"]
    assert payload["error"]["type"] == "BadRequestError"
    assert payload["error"]["code"] == 400
