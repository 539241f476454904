"""The ``nemo_rl`` adapter with Ray on: NeMo RL's ``NemoGym`` as a real Ray actor on the cluster.

When this process has called ``ray.init`` (``ray_in_use``), train mode no longer fakes the
actor seam (``nemo_rl_ray``): NeMo RL's caller talks to a real actor with the real
``.remote()``, ``ray.get`` and streaming refs, so what it sends and gets back goes through
Ray's serializer, and an actor that dies reaches it as Ray's ``ActorDiedError``.

Real: the actor's class is the tree's own ``NemoGym`` (``run_rollouts``, its postprocessing,
NaN check, ordering and metrics), made an actor with the options NeMo RL's decorator gives
it (``max_restarts=-1, max_task_retries=-1``: a crashed actor restarts and its call is retried
by Ray; ``ray.kill`` is final), created on the cluster in its own worker process.

Faked: only ``__init__``, which upstream starts NeMo Gym's servers (``RunHelper``) and builds a
``RolloutCollectionHelper``; the stack runs those servers already. The subclass ``__init__``
sets what that spin-up sets (``spun_up``): ``cfg``, ``rollout_max_attempts_to_avoid_lp_nan`` (on
trees before #3000), ``rh`` (``StackServers``: nothing to poll or shut down),
``head_server_config`` (the stack's head server) and, once the collection starts, ``rch``: where
``nemo_gym`` imports, NeMo Gym's own ``RolloutCollectionHelper()`` with ``BaseServerConfig`` of the
stack's head server, both built in the worker (``nemo_rl_gym.InActor``), else a ``RelayHelper``
that reaches this process's Gym client (``nemo_rl_relay`` says why it stays here). The actor asks
for no CPU
(``num_cpus=0``), as it only waits on I/O, so it schedules on a small machine.

The worker imports the tree and this package from the ``PYTHONPATH`` of the actor's
``runtime_env``: the tree first (as ``--rollout-chaos-upstream`` put it on ``sys.path`` here),
then this package's root, then this process's own ``PYTHONPATH``.

Lifecycle: the actor is started, and waited for (``READY_S``), when the collector is built,
off any deadline (a worker importing torch and NeMo RL takes seconds); it is killed when its
collection ends, however it ends, and its death is waited for (``KILL_WAIT_S``); a collector
that never collected kills it when it is garbage collected.
"""

from __future__ import annotations

import asyncio
import os
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from pytest_rollout_chaos.bundled import import_root
from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.history import History

READY_S: Final = 180.0
"""How long the actor's worker may take to start and import the tree."""
CALL_S: Final = 30.0
"""How long a call of ours on a running actor (installing ``rch``) may take."""
KILL_WAIT_S: Final = 3.0
"""How long a killed actor may take to be reported dead (the scenario runner grants 5 s after a cancel)."""
SOURCE: Final = "collector"


def ray_in_use() -> Any | None:
    """The ``ray`` module when this process has joined a cluster (``ray.init``), else None."""
    try:
        import ray
    except ImportError:
        return None
    return ray if ray.is_initialized() else None


class StackServers:
    """Stands for NeMo Gym's ``RunHelper``: the Gym servers are the stack's, running already."""

    def poll(self) -> None:
        return None

    def shutdown(self) -> None:
        return None


def spun_up(
    actor: Any, *, rch: Any, head_server_config: Any, max_attempts: int | None, tokenizer: Any
) -> None:
    """Set on ``actor`` what ``NemoGym``'s spin-up sets, over the stack's servers."""
    actor.rch = rch
    actor.head_server_config = head_server_config
    actor.rh = StackServers()
    if max_attempts is not None:
        # NeMo RL's knob for whole-batch NaN retries (trees before #3000): its own default of 1
        # unless the scenario's trainer_config asks otherwise (nemo_rl_settings)
        actor.rollout_max_attempts_to_avoid_lp_nan = max_attempts
    if callable(getattr(actor, "set_tokenizer", None)):  # trees where the actor holds its tokenizer
        actor.set_tokenizer(tokenizer)


def actor_class(upstream: Any) -> type:
    """``upstream`` (the tree's plain ``NemoGym``) with its spin-up replaced, as an actor's class."""

    def __init__(
        self: Any, cfg: dict[str, Any], head_server_config: Any, max_attempts: int | None, tokenizer: Any
    ) -> None:
        if hasattr(upstream, "_spinup"):  # spin-up lives outside __init__: __init__ is safe
            upstream.__init__(self, cfg)
        else:
            self.cfg = cfg
        spun_up(
            self,
            rch=None,
            head_server_config=head_server_config,
            max_attempts=max_attempts,
            tokenizer=tokenizer,
        )

    # Built here, not at module level: its base is whichever tree this run imported.
    return type(upstream.__name__, (upstream,), {"__init__": __init__, "__module__": __name__})


def runtime_env(tree: Path) -> dict[str, Any]:
    """The actor worker's ``PYTHONPATH``: the tree, this package's root, then ours."""
    ours = import_root()
    inherited = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    entries = dict.fromkeys([str(tree), str(ours), *inherited])
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(entries)}}


def whereabouts(actor: Any) -> dict[str, Any]:
    """Where ``actor`` runs: its process and node (called in the worker through ``__ray_call__``)."""
    import ray

    return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}


def install_helper(actor: Any, rch: Any) -> None:
    """Hand the actor its ``rch`` (called in the worker through ``__ray_call__``); one that
    ``install``s itself (``nemo_rl_gym.InActor``: NeMo Gym's own client) is built there."""
    install = getattr(rch, "install", None)
    if callable(install):
        install(actor)
    else:
        actor.rch = rch


class RayActor:
    """One ``NemoGym`` actor on the cluster: started and waited for now, ended by ``kill``."""

    def __init__(
        self,
        ray: Any,
        remote_class: Any,
        *,
        tree: Path,
        cfg: dict[str, Any],
        head_server_config: Any,
        max_attempts: int | None,
        tokenizer: Any,
        history: History,
    ) -> None:
        self._ray = ray
        self._history = history
        metadata = remote_class.__ray_metadata__
        plain = getattr(metadata.modified_class, "__ray_actor_class__", metadata.modified_class)
        self.class_name = plain.__name__
        self.name = f"rollout-chaos-{plain.__name__}-{uuid.uuid4().hex[:12]}"
        options = {
            **getattr(remote_class, "_default_options", {}),
            "num_cpus": 0,
            "runtime_env": runtime_env(tree),
            "name": self.name,
        }
        self.handle: Any = (
            ray.remote(actor_class(plain))
            .options(**options)
            .remote(cfg, head_server_config, max_attempts, tokenizer)
        )
        # Whatever happens to the collector, the actor does not outlive it.
        self._finalizer = weakref.finalize(self, _kill_quietly, ray, self.handle)
        try:
            where = ray.get(self.handle.__ray_call__.remote(whereabouts), timeout=READY_S)
        except Exception as error:
            self._finalizer()
            raise CollectorTargetError(
                f"NeMo RL's {plain.__name__} did not start as a Ray actor within {READY_S:.0f} s "
                f"({type(error).__name__}: {error}); its worker needs the tree ({tree}) and this "
                "package importable, and the cluster must have a node for a num_cpus=0 actor"
            ) from error
        self.pid: int = where["pid"]
        history.append(
            SOURCE,
            "info",
            "upstream",
            {
                "call": f"ray.remote({plain.__name__})",
                "actor": self.name,
                **where,
                "options": _shown(options),
            },
        )

    async def install(self, rch: Any) -> None:
        """Give the actor its ``rch`` before the caller uses it."""
        await _within(self.handle.__ray_call__.remote(install_helper, rch), CALL_S)

    async def kill(self) -> None:
        """``ray.kill`` (no restart), then wait up to ``KILL_WAIT_S`` to hear it is dead; idempotent."""
        if not self._finalizer.alive:
            return
        self._finalizer()
        data: dict[str, Any] = {"call": "ray.kill", "actor": self.name, "dead": False}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + KILL_WAIT_S
        while (left := deadline - loop.time()) > 0:  # ray.kill is asynchronous: ask until Ray says dead
            try:
                await _within(self.handle.__ray_ready__.remote(), left)
            except self._ray.exceptions.RayActorError:
                data["dead"] = True
                break
            except Exception as error:  # recorded, never raised: the collection's own outcome comes first
                data["error"] = f"{type(error).__name__}: {error}"
                break
            await asyncio.sleep(0.05)
        self._history.append(SOURCE, "info", "upstream", data)


def _kill_quietly(ray: Any, handle: Any) -> None:
    try:
        ray.kill(handle, no_restart=True)
    except Exception:  # the cluster is gone already: so is the actor
        return


async def _within(ref: Any, timeout_s: float) -> Any:
    return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout=timeout_s)


def _shown(options: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in options.items() if key not in ("runtime_env", "name")}


class RecordedHandle:
    """The real actor handle; ``on_remote(method, options)`` hears of each ``.remote()`` first."""

    def __init__(
        self, handle: Any, class_name: str, on_remote: Callable[[str, dict[str, Any]], None]
    ) -> None:
        self._handle = handle
        self._class_name = class_name
        self._on_remote = on_remote

    def __getattr__(self, name: str) -> RecordedMethod:
        return RecordedMethod(getattr(self._handle, name), f"{self._class_name}.{name}", {}, self._on_remote)


class RecordedMethod:
    """A real actor method: ``.options(...)`` and ``.remote(...)`` go to Ray unchanged."""

    def __init__(
        self,
        method: Any,
        name: str,
        options: dict[str, Any],
        on_remote: Callable[[str, dict[str, Any]], None],
    ) -> None:
        self._method = method
        self._name = name
        self._options = options
        self._on_remote = on_remote

    def options(self, **options: Any) -> RecordedMethod:
        return RecordedMethod(
            self._method.options(**options), self._name, {**self._options, **options}, self._on_remote
        )

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        self._on_remote(self._name, dict(self._options))
        return self._method.remote(*args, **kwargs)
