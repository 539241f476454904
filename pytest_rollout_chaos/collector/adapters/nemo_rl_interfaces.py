"""NeMo RL's generation and environment interfaces over the stack, for ``validate()`` to drive.

``HttpGeneration`` is a ``GenerationInterface`` (made a subclass of the tree's own at run time)
whose ``generate_async`` yields ``(index, one-sample batch)`` as each request completes, shaped as
NeMo RL's ``VllmAsyncGenerationWorker`` answers (output ids = prompt + generation, logprobs zero
over the prompt, a logprob the engine did not give left 0); each sample is one
``/v1/completions`` request with the prompt's token ids to the policy server.

``EnvHandle`` is a Ray actor handle for one task's environment: ``step.remote(logs, metadata)``
runs ``ctx.env.step`` (one ``/step_batch``) on the collection's event loop, one call at a time as
an actor with ``max_concurrency=1`` does, and records an ``env_step`` event with the task, the
batch size and the turn the message logs are at. ``ray_get_resolves`` fakes ``ray.get`` for those
calls the way NeMo RL's CPU tests fake it; ``on_worker_thread`` runs the blocking ``validate()``
and, when the collection is cancelled, stops what it left running (``Stop``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeVar

import aiohttp

from pytest_rollout_chaos.collector.protocol import CollectionError, CollectorContext, Environment

T = TypeVar("T")
SOURCE: Final = "collector"
POLL_S: Final = 0.5  # how often a wait for an environment call looks whether the collection was cancelled


def policy_root(ctx: CollectorContext) -> str:
    """The policy's root URL: ``ctx.policy`` may be given with or without OpenAI's ``/v1``."""
    return ctx.policy.rstrip("/").removesuffix("/v1")


class HttpGeneration:
    """Generation through the policy's ``/v1/completions``; ``batches`` is the tree's ``BatchedDataDict``."""

    batches: Any

    def __init__(self, ctx: CollectorContext, cfg: dict[str, Any], stop: Stop) -> None:
        self.cfg = cfg  # NeMo RL reads vllm_cfg.async_engine here to choose generate_async
        self._url = f"{policy_root(ctx)}/v1/completions"
        self._model = ctx.model
        self._stop = stop

    def init_collective(self, ip: str, port: int, world_size: int) -> list[Any]:
        raise NotImplementedError("the policy server owns its weights; there is no collective to join")

    def prepare_for_generation(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def finish_generation(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def shutdown(self) -> bool:
        """Nothing to shut down: the stack owns the policy server (abstract in NeMo RL after #3000)."""
        return True

    def generate(self, data: Any, greedy: bool = False) -> Any:
        """The whole batch at once, padded as NeMo RL pads generation outputs."""

        async def every() -> list[tuple[int, Any]]:
            return [item async for item in self.generate_async(data, greedy)]

        outputs = sorted(asyncio.run(every()), key=lambda item: int(item[0]))
        pads = {"output_ids": self.cfg["_pad_token_id"], "logprobs": 0.0}
        return self.batches.from_batches([output for _, output in outputs], pad_value_dict=pads)

    async def generate_async(self, data: Any, greedy: bool = False) -> Any:
        self._stop.watch(asyncio.get_running_loop())
        async with aiohttp.ClientSession() as session:
            pending = [
                asyncio.ensure_future(self._one(session, data, index, greedy))
                for index in range(len(data["input_ids"]))
            ]
            try:
                for done in asyncio.as_completed(pending):
                    yield await done
            finally:
                for task in pending:
                    task.cancel()

    async def _one(
        self, session: aiohttp.ClientSession, data: Any, index: int, greedy: bool
    ) -> tuple[int, Any]:
        import torch

        self._stop.check()
        length = int(data["input_lengths"][index])
        prompt = data["input_ids"][index, :length]
        allowed = max(0, min(self.cfg["max_new_tokens"], self.cfg["vllm_cfg"]["max_model_len"] - length))
        generated: list[int] = []
        logprobs: list[float | None] = []
        finish = "stop"
        if allowed:  # NeMo RL's worker asks nothing of the engine when no token fits
            per_sample = data.get("stop_strings")
            stops = [*(self.cfg["stop_strings"] or []), *((per_sample[index] if per_sample else None) or [])]
            body: dict[str, Any] = {
                "model": self._model,
                "prompt": prompt.tolist(),
                "max_tokens": allowed,
                "temperature": 0.0 if greedy else self.cfg["temperature"],
                "top_p": self.cfg["top_p"],
                "logprobs": 0,
                "return_tokens_as_token_ids": True,
                "return_token_ids": True,
                **({"stop": stops} if stops else {}),
            }
            generated, logprobs, finish = await self._complete(session, body)
        output_ids = torch.cat([prompt, torch.tensor(generated, dtype=prompt.dtype)]).unsqueeze(0)
        kept = torch.zeros(output_ids.shape, dtype=torch.float32)
        for position, value in enumerate(logprobs):
            if value is not None:
                kept[0, length + position] = value
        return index, self.batches(
            {
                "output_ids": output_ids,
                "logprobs": kept,
                "generation_lengths": torch.tensor([len(generated)]),
                "unpadded_sequence_lengths": torch.tensor([length + len(generated)]),
                "truncated": torch.tensor([finish == "length"]),
            }
        )

    async def _complete(
        self, session: aiohttp.ClientSession, body: dict[str, Any]
    ) -> tuple[list[int], list[float | None], str]:
        async with session.post(self._url, json=body) as response:
            if response.status >= 400:
                raise RuntimeError(f"policy answered HTTP {response.status}: {(await response.text())[:200]}")
            choice = (await response.json())["choices"][0]
        logprobs = choice.get("logprobs") or {}
        tokens = choice.get("token_ids") or [
            int(str(token).split(":")[-1]) for token in logprobs.get("tokens") or []
        ]
        values = list(logprobs.get("token_logprobs") or [None] * len(tokens))
        return [int(token) for token in tokens], values, str(choice.get("finish_reason") or "stop")


class EnvRef:
    """What ``step.remote()`` returns: the step under way on the collection's loop."""

    def __init__(self, future: concurrent.futures.Future[Any], stop: Stop) -> None:
        self.future = future
        self._stop = stop

    def result(self) -> Any:
        """The step's answer, as ``ray.get`` waits for it; a cancelled collection stops the wait."""
        while True:
            try:
                return self.future.result(timeout=POLL_S)
            except concurrent.futures.TimeoutError:
                self._stop.check()


class RemoteMethod:
    """An actor method: ``.remote(...)`` submits the call and returns its ``EnvRef``."""

    def __init__(self, submit: Callable[..., EnvRef]) -> None:
        self.remote = submit


class EnvHandle:
    """One task's environment as a Ray actor handle over ``ctx.env``; its calls run in turn."""

    def __init__(
        self,
        task: str,
        *,
        ctx: CollectorContext,
        env: Environment,
        loop: asyncio.AbstractEventLoop,
        stop: Stop,
        environment_return: Any,
    ) -> None:
        self.task = task
        self.step = RemoteMethod(self._submit)
        self._ctx = ctx
        self._env = env
        self._loop = loop
        self._stop = stop
        self._return = environment_return  # the tree's EnvironmentReturn
        self._in_turn = asyncio.Lock()

    def _submit(self, message_logs: list[Any], metadata: list[Any]) -> EnvRef:
        self._stop.check()
        step = asyncio.run_coroutine_threadsafe(self._step(message_logs, metadata), self._loop)
        return EnvRef(step, self._stop)

    async def _step(self, message_logs: list[Any], metadata: list[Any]) -> Any:
        import torch

        async with self._in_turn:
            turns = sorted({sum(m.get("role") == "assistant" for m in log) - 1 for log in message_logs})
            event: dict[str, Any] = {"task": self.task, "batch_size": len(message_logs)}
            event["turn"] = turns[0] if turns else None
            if len(turns) > 1:
                event["turns"] = turns
            self._ctx.history.append(SOURCE, "info", "env_step", event)
            returned = await self._env.step(list(message_logs), list(metadata))
        return self._return(
            observations=list(returned.observations),
            metadata=list(returned.metadata),
            next_stop_strings=list(returned.next_stop_strings),
            rewards=torch.tensor(list(returned.rewards), dtype=torch.float32),
            terminateds=torch.tensor(list(returned.terminateds), dtype=torch.bool),
            answers=returned.answers,
        )


@contextlib.contextmanager
def ray_get_resolves(ray: Any) -> Iterator[None]:
    """``ray.get`` waits for ``EnvRef``s (one or a list); anything else goes to the real one."""
    real = ray.get

    def get(refs: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(refs, EnvRef):
            return refs.result()
        if isinstance(refs, list) and refs and all(isinstance(ref, EnvRef) for ref in refs):
            return [ref.result() for ref in refs]
        return real(refs, *args, **kwargs)

    ray.get = get
    try:
        yield
    finally:
        ray.get = real


class Stop:
    """Ends what a cancelled collection left running: no new call starts, NeMo RL's loops are cancelled."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._lock = threading.Lock()

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if loop not in self._loops:
                self._loops.append(loop)

    def check(self) -> None:
        if self._set.is_set():
            raise CollectionError("the collection was cancelled; NeMo RL's validation is stopped")

    def now(self) -> None:
        self._set.set()
        with self._lock:
            loops = list(self._loops)
        for loop in loops:
            with contextlib.suppress(RuntimeError):  # that loop is closed already
                loop.call_soon_threadsafe(_cancel_all, loop)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


async def on_worker_thread(work: Callable[[], T], stop: Stop) -> T:
    """``work()`` on a daemon thread; a cancelled caller stops it (``stop``) instead of waiting."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if outcome.done():
            return
        if error is not None:
            outcome.set_exception(error)
        else:
            outcome.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = work()
        except BaseException as raised:
            error = raised
        with contextlib.suppress(RuntimeError):  # the collection's loop is closed: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="nemo-rl-validate", daemon=True).start()
    try:
        return await outcome
    except asyncio.CancelledError:
        stop.now()
        raise
