"""The batching engine: concurrent requests are decoded together, one token each per model step.

One background thread owns the model and a slot KV cache. Each step it admits waiting
requests (a prefill pass each), then runs one batched decode pass for every active request,
samples every row with its request's own parameters and seeded RNG, and finishes the
rows that hit EOS, a stop token, a stop string or their length. Requests come in from the
asyncio side through ``generate()``, so the event loop (and ``/health``) never waits on torch.

Logprobs are vLLM's default ``raw_logprobs`` mode: ``log_softmax`` of the model's raw logits,
before temperature and top-p, for the token that was sampled (and for the top alternatives).
The same seed and the same request give the same tokens and logprobs.
"""

from __future__ import annotations

import asyncio
import logging
import math
import queue
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch.nn import functional

from pytest_rollout_chaos.servers.policy.model import KVCache, TinyLlama, causal_mask

FinishReason = Literal["stop", "length"]
_GREEDY_BELOW = 1e-5
_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Per-request sampling settings (vLLM's names and defaults)."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: frozenset[int] = frozenset()
    top_logprobs: int = 0
    ignore_eos: bool = False
    min_tokens: int = 0
    """Before this many tokens, EOS and ``stop_token_ids`` cannot be sampled (vLLM masks their
    logits; the reported logprobs stay the raw ones)."""
    include_stop_str_in_output: bool = False
    """Keep the stop string that ended the generation in its text (multi-turn agents that stop at
    ``</tool_call>`` need the closing tag to parse the call)."""


@dataclass(frozen=True, slots=True)
class Generation:
    """What one request produced; ``token_ids`` include the EOS token when it ended the turn."""

    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[tuple[int, float]]]
    text: str
    finish_reason: FinishReason
    stop_reason: str | int | None


@dataclass(slots=True)
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Generation]
    rng: random.Random
    slot: int = -1
    length: int = 0  # tokens in the cache for this slot
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)


class Engine:
    """See the module docstring. ``decode(ids)`` turns generated ids into text (special tokens skipped)."""

    def __init__(
        self,
        model: TinyLlama,
        *,
        eos_token_id: int,
        decode: Callable[[list[int]], str],
        max_batch: int = 64,
        seed: int = 0,
    ) -> None:
        self.model = model
        self.max_model_len = model.config.max_position_embeddings
        self._eos = eos_token_id
        self._decode = decode
        self._cache = KVCache(model.config, max_batch, self.max_model_len)
        self._max_batch = max_batch
        # Active requests live in cache rows 0..n-1 (request.slot == its index here), so a
        # decode step reads the cache through plain views; a finished row is refilled by the last.
        self._active: list[_Request] = []
        self._waiting: queue.Queue[_Request | None] = queue.Queue()
        self._session_seeds = random.Random(seed)
        self._seeds = self._session_seeds
        self._seed_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="policy-engine", daemon=True)
        self._thread.start()

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        """Queue one request and wait for its result; cancelling the await drops the request."""
        if not prompt_ids:
            raise ValueError("the prompt is empty: at least one token is required")
        if len(prompt_ids) + params.max_tokens > self.max_model_len:
            raise ValueError(
                f"prompt ({len(prompt_ids)}) + max_tokens ({params.max_tokens}) > {self.max_model_len}"
            )
        loop = asyncio.get_running_loop()
        with self._seed_lock:
            seed = params.seed if params.seed is not None else self._seeds.getrandbits(63)
        request = _Request(list(prompt_ids), params, loop, loop.create_future(), random.Random(seed))
        self._waiting.put(request)
        return await request.future

    def reseed(self, seed: int | None) -> None:
        """Give unseeded requests their seeds from a sequence of ``seed``'s own (a scenario that names
        its seed samples the same tokens wherever it runs in a session), or, with None, from the
        session's sequence again, where it was left: a seeded scenario shifts no other's samples."""
        with self._seed_lock:
            self._seeds = self._session_seeds if seed is None else random.Random(seed)

    def close(self) -> None:
        """Stop the engine thread (pending requests fail)."""
        self._waiting.put(None)
        self._thread.join(timeout=5.0)

    # -- engine thread ------------------------------------------------------------------------
    def _run(self) -> None:
        with torch.inference_mode():
            while True:
                try:
                    if not self._admit():
                        break
                    for request in [r for r in self._active if r.future.cancelled()]:
                        self._release(request)  # the client went away
                    if self._active:
                        self._decode_step()
                        for request in [r for r in self._active if self._maybe_finish(r)]:
                            self._release(request)
                except Exception as error:  # a bug: fail every request loudly, keep serving
                    _logger.exception("engine step failed")
                    for request in self._active:
                        self._fail(request, error)
                    self._active = []
        for request in self._active:
            self._fail(request, RuntimeError("the engine stopped"))

    def _admit(self) -> bool:
        """Prefill waiting requests into free cache rows; block while idle. False on shutdown."""
        while len(self._active) < self._max_batch:
            try:
                request = self._waiting.get(timeout=0.5) if not self._active else self._waiting.get_nowait()
            except queue.Empty:
                if self._active:
                    return True
                continue
            if request is None:
                return False
            if request.future.cancelled():
                continue
            try:
                self._prefill(request)
            except Exception as error:
                self._fail(request, error)
                continue
            if not self._maybe_finish(request):
                self._active.append(request)
        return True

    def _prefill(self, request: _Request) -> None:
        request.slot = len(self._active)
        ids = torch.tensor([request.prompt_ids])
        length = ids.shape[1]
        logits, kv = self.model(ids, torch.arange(length)[None], causal_mask(length))
        for layer, (k, v) in enumerate(kv):
            self._cache.keys[layer][request.slot, :, :length] = k[0]
            self._cache.values[layer][request.slot, :, :length] = v[0]
        request.length = length
        self._sample([request], logits[:, -1])

    def _release(self, request: _Request) -> None:
        """Free ``request``'s row by moving the last active row into it."""
        last = self._active.pop()
        if last is not request:
            for layer in range(self.model.config.num_hidden_layers):
                self._cache.keys[layer][request.slot, :, : last.length] = self._cache.keys[layer][
                    last.slot, :, : last.length
                ]
                self._cache.values[layer][request.slot, :, : last.length] = self._cache.values[layer][
                    last.slot, :, : last.length
                ]
            last.slot = request.slot
            self._active[request.slot] = last

    def _decode_step(self) -> None:
        active = self._active
        count = len(active)
        lengths = torch.tensor([request.length for request in active])
        span = int(lengths.max()) + 1
        ids = torch.tensor([[request.token_ids[-1]] for request in active])
        # Row i sees its cached positions and its new token at position lengths[i]; the rest is padding.
        allowed = torch.arange(span)[None] <= lengths[:, None]
        mask = torch.where(allowed, 0.0, -math.inf)[:, None, None, :]
        cache = [
            (self._cache.keys[layer][:count], self._cache.values[layer][:count])
            for layer in range(self.model.config.num_hidden_layers)
        ]
        logits, _ = self.model(ids, lengths[:, None], mask, cache, span)
        for request in active:
            request.length += 1
        self._sample(active, logits[:, -1])

    def _sample(self, requests: list[_Request], logits: torch.Tensor) -> None:
        """Sample one token per row of ``logits`` (B, V), batched; each row uses its request's RNG.

        Sampling is inverse-CDF with one uniform draw from the request's own seeded RNG per
        token, so a request's tokens depend on its seed and its logits only, not on its batch.
        """
        logits = logits.float()
        logprobs = functional.log_softmax(logits, dim=-1)  # raw_logprobs: before temperature/top-p
        logits = self._mask_until_min_tokens(requests, logits)
        temperatures = torch.tensor([max(r.params.temperature, _GREEDY_BELOW) for r in requests])
        probs = functional.softmax(logits / temperatures[:, None], dim=-1)
        top_ps = torch.tensor([r.params.top_p for r in requests])
        if bool((top_ps < 1.0).any()):
            sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
            outside = sorted_probs.cumsum(-1) - sorted_probs > top_ps[:, None]
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs.masked_fill(outside, 0.0))
        cdf = probs.cumsum(-1)
        draws = torch.tensor([[r.rng.random()] for r in requests]) * cdf[:, -1:]
        sampled = torch.searchsorted(cdf, draws).clamp_(max=logits.shape[-1] - 1)[:, 0]
        greedy = temperatures <= _GREEDY_BELOW
        tokens = torch.where(greedy, logits.argmax(-1), sampled)
        chosen = logprobs.gather(1, tokens[:, None])[:, 0]
        top = max(r.params.top_logprobs for r in requests)
        top_values, top_ids = torch.topk(logprobs, top) if top else (None, None)
        for row, (request, token, logprob) in enumerate(
            zip(requests, tokens.tolist(), chosen.tolist(), strict=True)
        ):
            request.token_ids.append(int(token))
            request.logprobs.append(float(logprob))
            k = request.params.top_logprobs
            if k and top_values is not None and top_ids is not None:
                request.top_logprobs.append(
                    list(zip(top_ids[row, :k].tolist(), top_values[row, :k].tolist(), strict=True))
                )

    def _mask_until_min_tokens(self, requests: list[_Request], logits: torch.Tensor) -> torch.Tensor:
        """``logits`` with EOS and the stop ids at -inf for requests short of their ``min_tokens``."""
        short = [(row, r) for row, r in enumerate(requests) if len(r.token_ids) < r.params.min_tokens]
        if not short:
            return logits
        masked = logits.clone()
        for row, request in short:
            ids = {self._eos, *request.params.stop_token_ids} - (
                {self._eos} if request.params.ignore_eos else set()
            )
            masked[row, sorted(ids)] = -math.inf
        return masked

    def _maybe_finish(self, request: _Request) -> bool:
        params = request.params
        token = request.token_ids[-1]
        text = self._decode(request.token_ids) if params.stop else ""
        result: tuple[FinishReason, str | int | None] | None = None
        if token == self._eos and not params.ignore_eos:
            result = ("stop", None)
        elif token in params.stop_token_ids:
            result = ("stop", token)
        else:
            hit = min(((text.find(stop), stop) for stop in params.stop if stop in text), default=None)
            if hit is not None:
                kept = len(hit[1]) if params.include_stop_str_in_output else 0
                text = text[: hit[0] + kept]
                result = ("stop", hit[1])
            elif len(request.token_ids) >= params.max_tokens or request.length + 1 >= self.max_model_len:
                result = ("length", None)
        if result is None:
            return False
        if not params.stop:
            text = self._decode(request.token_ids)
        generation = Generation(
            request.token_ids, request.logprobs, request.top_logprobs, text, result[0], result[1]
        )
        request.loop.call_soon_threadsafe(_resolve, request.future, generation, None)
        return True

    def _fail(self, request: _Request, error: BaseException) -> None:
        request.loop.call_soon_threadsafe(_resolve, request.future, None, error)


def _resolve(
    future: asyncio.Future[Generation], value: Generation | None, error: BaseException | None
) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    elif value is not None:
        future.set_result(value)
