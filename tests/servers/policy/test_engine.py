"""The batching engine in-process with the bundled model: batching, seeds, stops, cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_rollout_chaos import bundled
from pytest_rollout_chaos.servers.gym import convert, tasks
from pytest_rollout_chaos.servers.policy.engine import Engine, SamplingParams
from pytest_rollout_chaos.servers.policy.model import LlamaConfig, TinyLlama
from pytest_rollout_chaos.servers.policy.tokenization import PolicyTokenizer


@pytest.fixture(scope="module")
def tokenizer() -> PolicyTokenizer:
    return PolicyTokenizer(bundled.tiny_model_dir())


@pytest.fixture
def engine(tokenizer: PolicyTokenizer) -> Iterator[Engine]:
    model = TinyLlama.load(bundled.tiny_model_dir())
    engine = Engine(model, eos_token_id=tokenizer.eos_token_id, decode=tokenizer.decode, max_batch=8)
    yield engine
    engine.close()


def _prompt(tokenizer: PolicyTokenizer, word: str) -> list[int]:
    return tokenizer.render_chat([{"role": "user", "content": f"Repeat exactly: {word}"}])


@pytest.mark.asyncio
async def test_batched_greedy_equals_alone(engine: Engine, tokenizer: PolicyTokenizer) -> None:
    params = SamplingParams(max_tokens=12, temperature=0.0)
    prompts = [_prompt(tokenizer, word) for word in ("river", "tiger", "apple banana cherry", "x")]
    alone = [await engine.generate(prompt, params) for prompt in prompts]
    together = await asyncio.gather(*(engine.generate(prompt, params) for prompt in prompts))
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]
    for a, b in zip(alone, together, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


@pytest.mark.asyncio
async def test_seed_fixes_the_sample(engine: Engine, tokenizer: PolicyTokenizer) -> None:
    prompt = _prompt(tokenizer, "meadow")
    params = SamplingParams(max_tokens=16, temperature=1.5, seed=5, ignore_eos=True)
    first, second = await engine.generate(prompt, params), await engine.generate(prompt, params)
    assert (first.token_ids, first.logprobs) == (second.token_ids, second.logprobs)
    assert first.finish_reason == "length"
    assert len(first.token_ids) == 16


@pytest.mark.asyncio
async def test_eos_and_stop_token_ids_finish_with_stop(engine: Engine, tokenizer: PolicyTokenizer) -> None:
    done = await engine.generate(_prompt(tokenizer, "river"), SamplingParams(max_tokens=40, temperature=0.0))
    assert done.finish_reason == "stop"
    assert done.token_ids[-1] == tokenizer.eos_token_id
    assert done.stop_reason is None
    first = done.token_ids[0]
    stopped = await engine.generate(
        _prompt(tokenizer, "river"),
        SamplingParams(max_tokens=40, temperature=0.0, stop_token_ids=frozenset({first})),
    )
    assert (stopped.token_ids, stopped.stop_reason) == ([first], first)


@pytest.mark.asyncio
async def test_cancelled_requests_free_their_slot(engine: Engine, tokenizer: PolicyTokenizer) -> None:
    long = SamplingParams(max_tokens=500, ignore_eos=True)
    tasks = [asyncio.create_task(engine.generate(_prompt(tokenizer, "x"), long)) for _ in range(8)]
    await asyncio.sleep(0.3)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # All 8 slots are free again: 8 more requests fit and finish.
    short = SamplingParams(max_tokens=2, ignore_eos=True)
    results = await asyncio.wait_for(
        asyncio.gather(*(engine.generate(_prompt(tokenizer, "y"), short) for _ in range(8))), timeout=30
    )
    assert all(len(result.token_ids) == 2 for result in results)


@pytest.mark.asyncio
async def test_rejects_prompts_beyond_the_context(engine: Engine) -> None:
    with pytest.raises(ValueError, match=r"max_tokens \(10\) > 1024"):
        await engine.generate([1] * 1020, SamplingParams(max_tokens=10))
    with pytest.raises(ValueError, match="empty"):
        await engine.generate([], SamplingParams(max_tokens=1))


def test_config_rejects_other_architectures(tmp_path: Path) -> None:
    path = bundled.tiny_model_dir() / "config.json"
    target = tmp_path / "config.json"
    target.write_text(path.read_text().replace('"model_type": "llama"', '"model_type": "gpt2"'))
    with pytest.raises(ValueError, match="model_type 'gpt2' is not supported"):
        LlamaConfig.from_json(target)


@pytest.mark.asyncio
async def test_a_stop_string_is_kept_in_the_text_only_when_asked(
    engine: Engine, tokenizer: PolicyTokenizer
) -> None:
    """A turn that stops at ``</tool_call>`` keeps its token ids, ending without EOS; its text keeps
    the closing tag only with ``include_stop_str_in_output`` (vLLM's rule)."""
    prompt = tokenizer.render_chat(
        [{"role": "user", "content": "What is 12 + 7?"}],
        tools=convert.tools_to_chat([tasks.CALCULATOR_TOOL]),
    )
    asked = {"max_tokens": 60, "temperature": 0.0, "stop": ("</tool_call>",)}
    cut = await engine.generate(prompt, SamplingParams(**asked))  # type: ignore[arg-type]
    kept = await engine.generate(prompt, SamplingParams(**asked, include_stop_str_in_output=True))  # type: ignore[arg-type]
    assert (cut.finish_reason, cut.stop_reason) == ("stop", "</tool_call>")
    assert cut.token_ids == kept.token_ids
    assert cut.token_ids[-1] != tokenizer.eos_token_id
    assert not cut.text.endswith("</tool_call>")
    assert kept.text == cut.text + "</tool_call>"
