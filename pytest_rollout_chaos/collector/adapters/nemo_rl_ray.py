"""The Ray seam of the ``nemo_rl`` adapter: an actor handle, ``ray.get``, and the caller's thread.

NeMo RL's caller talks to its ``NemoGym`` actor the Ray way: ``env.run_rollouts.remote(...)``
then ``ray.get(ref)`` (one list), or ``.options(num_returns="streaming").remote(...)`` consumed
with ``async for`` (one ref per row). NeMo RL's own CPU tests fake exactly this seam, and so
does this module: ``.remote()`` runs the actor's method as a task on the collection's event
loop (an async actor's methods share one loop in Ray too), ``ray.get`` waits for it, and the
blocking caller runs on its own thread meanwhile. Everything else the caller's module asks of
``ray`` is the real Ray. Nothing is serialized: arguments, results and exceptions pass as they are.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

from pytest_rollout_chaos.errors import CollectorTargetError


class ObjectRef:
    """What ``.remote()`` returns: the actor task's result, for ``ray.get`` or ``await``."""

    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self.future = future

    def __await__(self) -> Any:
        return asyncio.wrap_future(self.future).__await__()


class _Ready:
    """One streamed item, already there (Ray's ref to a generator's yielded value)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Any:
        yield from ()
        return self.value


_END: Final = object()


class ObjectRefStream:
    """What ``.options(num_returns="streaming").remote()`` returns: one ref per yielded item."""

    def __init__(self, handle: ActorHandle, generator: Any) -> None:
        self._handle = handle
        self._generator = generator

    def __aiter__(self) -> ObjectRefStream:
        return self

    async def __anext__(self) -> _Ready:
        item = await asyncio.wrap_future(self._handle.submit(_next_or_end(self._generator)))
        if item is _END:
            raise StopAsyncIteration
        return _Ready(item)


async def _next_or_end(generator: Any) -> Any:
    try:
        return await generator.__anext__()
    except StopAsyncIteration:
        return _END


class ActorMethod:
    """``handle.method``: ``.remote(...)`` and ``.options(...)``, as on a Ray actor handle."""

    def __init__(self, handle: ActorHandle, function: Callable[..., Any], options: dict[str, Any]) -> None:
        self._handle = handle
        self._function = function
        self._options = options

    def options(self, **options: Any) -> ActorMethod:
        return ActorMethod(self._handle, self._function, {**self._options, **options})

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef | ObjectRefStream:
        self._handle.on_remote(self._function.__qualname__, dict(self._options))
        if inspect.isasyncgenfunction(self._function):
            if self._options.get("num_returns") != "streaming":
                raise CollectorTargetError(
                    f"{self._function.__qualname__} streams; the caller asked for it without "
                    "num_returns='streaming'"
                )
            return ObjectRefStream(self._handle, self._function(*args, **kwargs))
        return ObjectRef(self._handle.submit(_as_coroutine(self._function, args, kwargs)))


async def _as_coroutine(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = function(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


class ActorHandle:
    """One async actor: its methods run on ``loop`` (the collection's), one task per call.

    ``on_remote(method, options)`` hears of every ``.remote()`` call, for the History.
    """

    def __init__(
        self,
        actor: Any,
        loop: asyncio.AbstractEventLoop,
        on_remote: Callable[[str, dict[str, Any]], None] = lambda method, options: None,
    ) -> None:
        self._actor = actor
        self._loop = loop
        self.on_remote = on_remote
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> ActorMethod:
        return ActorMethod(self, getattr(self._actor, name), {})

    def submit(self, coroutine: Any) -> concurrent.futures.Future[Any]:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def cancel_pending(self) -> None:
        """Cancel what is still running, so a caller blocked in ``ray.get`` returns."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.cancel()


class _RayModule:
    """``ray`` as the caller's module sees it: ``get`` waits for our refs, the rest is real Ray."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def get(self, refs: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(refs, ObjectRef):
            return refs.future.result()
        if isinstance(refs, list) and refs and all(isinstance(ref, ObjectRef) for ref in refs):
            return [ref.future.result() for ref in refs]
        return self.real.get(refs, *args, **kwargs)


_ray_lock = threading.Lock()
_ray_users = 0


@contextlib.contextmanager
def ray_get_faked(module: Any) -> Iterator[None]:
    """While any collection runs, ``module.ray`` waits for this adapter's refs (NeMo RL's tests
    patch ``ray.get`` for the same reason); anything else goes to the real ``ray``."""
    global _ray_users
    with _ray_lock:
        if _ray_users == 0 and not isinstance(module.ray, _RayModule):
            module.ray = _RayModule(module.ray)
        _ray_users += 1
    try:
        yield
    finally:
        with _ray_lock:
            _ray_users -= 1
            if _ray_users == 0 and isinstance(module.ray, _RayModule):
                module.ray = module.ray.real


async def in_thread(loop: asyncio.AbstractEventLoop, call: Callable[[], Any]) -> Any:
    """Run the blocking caller on its own daemon thread (a hung one never holds up exit)."""
    done: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def work() -> None:
        try:
            value, error = call(), None
        except BaseException as raised:  # handed to the event loop, which re-raises it
            value, error = None, raised
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="nemo-rl-caller", daemon=True).start()
    return await done
