"""The ``nemo_gym`` target: NeMo Gym's own rollout collection, the path ``ng_collect_rollouts`` runs.

What runs is NeMo Gym's code, in NeMo Gym's interpreter (``--rollout-chaos-gym-python``, or what
``servers.nemo_gym.locate`` finds): a child process runs ``servers/nemo_gym/rollouts.py``, which
calls ``RolloutCollectionHelper().run_examples(rows, head_server_config=<the stack's head>,
semaphore=...)`` and awaits its awaitables in completion order as ``run_from_config`` does, so the
first one that raises ends the collection. NeMo Gym's own client learns every server from the
head server's config, which names each agent at the end of its ``collector->agent`` link (from
0.5 on, each agent's ``legacy_agent`` environment server), so every fault acts on it from outside,
as on any collector. This is the collector NeMo Skills' pipeline runs. ``ctx.gym`` (the harness's
``GymClient``) and ``ctx.env`` are not used: the ``short_results`` fault and the
``collector->resources`` link cannot reach this collector, and those scenarios skip, saying so.

**Rows in, results out.** The rows go to the child as given, as one JSON document on its stdin;
each result comes back on its stdout as ``run_examples`` hands it over, and becomes a Rollout by
``collector.results``' mapping, the one every collector here uses: the status (``truncated`` when
the last model call stopped at ``max_output_tokens``), the reward, one Turn per output item with
token ids (none when no item has them, or when one's cannot be read). Nothing else is caught,
filled or converted: a row NeMo Gym does not hand back has no Rollout, and what it raises is
raised (``NemoGymRaisedError``, naming its type, message, frame and causes). ``in_train_batch``
stays unsaid.

**Stopped on every path.** The child runs in its own process group, registered with the session's
reaper; it is killed when its answer is read, at ``collect_timeout_s`` (NeMo Gym has no deadline
of its own: its client retries a refused agent without limit), when the collection is cancelled,
and with pytest.

**Settings.** Upstream's defaults: ``num_samples_in_parallel`` (no limit, the semaphore
``run_from_config`` builds from it) unless ``workload.trainer_config`` sets
``nemo_gym.num_samples_in_parallel``; ``head_server_config`` is the stack's head server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar, Final

from pytest_rollout_chaos.collector import results
from pytest_rollout_chaos.collector.abilities import Reach
from pytest_rollout_chaos.collector.adapters.trainer_settings import TrainerSettings
from pytest_rollout_chaos.collector.adapters.upstream import Upstream
from pytest_rollout_chaos.collector.failures import root_cause
from pytest_rollout_chaos.collector.protocol import (
    CollectionError,
    CollectorContext,
    Mode,
    Rollout,
    Row,
    row_index,
)
from pytest_rollout_chaos.errors import CollectorTargetError
from pytest_rollout_chaos.servers.gym.tasks import AGENT_FOR_TASK
from pytest_rollout_chaos.servers.nemo_gym import config as gym_config
from pytest_rollout_chaos.servers.nemo_gym.locate import INSTALL_HINT, GymPython, locate
from pytest_rollout_chaos.servers.nemo_gym.stack import RAY_ENV
from pytest_rollout_chaos.servers.reaper_client import reaper

PROGRAM: Final = Path(gym_config.__file__).with_name("rollouts.py")
SOURCE: Final = "collector"
PARALLEL: Final = "num_samples_in_parallel"
KNOWN: Final = (PARALLEL,)
"""What ``workload.trainer_config`` may set (``nemo_gym.<key>``)."""
LINE_LIMIT: Final = 1 << 26  # one result per line: a long trajectory's JSON exceeds asyncio's 64 KiB
STDERR_TAIL_LINES: Final = 20
_LEFT_OUT: Final = ("PYTHONPATH", "PYTHONHOME")  # the child imports nothing of this checkout

GYM_CLIENT: Final = (
    "NeMo Gym's own: nemo_gym.rollout_collection.RolloutCollectionHelper.run_examples, in NeMo Gym's "
    "interpreter, through the stack's head server and links"
)
"""What plays NeMo Gym's client here (``rollout-chaos gate`` and the report say it)."""
UPSTREAM: Final = Upstream(adapter="nemo_gym", modules=(), install=INSTALL_HINT)
"""Nothing of NeMo Gym is imported here: it runs in its own interpreter, which the session-start
check locates (``preflight.gym_problem``)."""


class NemoGymRaisedError(CollectionError):
    """NeMo Gym's rollout collection raised: its type, message, frame and causes, as it raised them."""


class NemoGymCollector:
    """NeMo Gym's ``run_examples`` over the stack, in NeMo Gym's interpreter (module docstring)."""

    styles = ("gym",)  # NeMo Gym's agents own the loop; it has no native-style collection
    modes = ("train", "validation")  # one collection path for both: ng_collect_rollouts has no mode
    # Any group size: the rows go in as given, one /run each (run_examples applies no num_repeats).
    reaches: ClassVar[Reach] = {
        **dict.fromkeys(("policy", "model", "resources", "head", "agent", *AGENT_FOR_TASK.values())),
        **dict.fromkeys(("agent->model", "agent->resources", "model->policy", "collector->agent")),
        "collector": None,  # the collection task: cancelled, it kills the child
    }
    program: ClassVar[Path] = PROGRAM
    own_concurrency: ClassVar[str] = (
        f"NeMo Gym's {PARALLEL} (upstream's default: no limit; workload.trainer_config sets it)"
    )

    def __init__(self, ctx: CollectorContext, *, python: GymPython | None = None) -> None:
        if ctx.head_url is None:
            raise ValueError(
                "the nemo_gym target hands NeMo Gym the stack's head server, and the context has no head_url"
            )
        self.ctx = ctx
        self.head = gym_config.host_port(ctx.head_url)
        self.python = python if python is not None else locate(ctx.gym_python)
        settings(ctx)  # an unknown or invalid trainer_config key fails here, before anything runs

    async def collect(self, rows: Sequence[Row], *, mode: Mode) -> list[Rollout]:
        history = self.ctx.history
        taken = settings(self.ctx)
        taken.record(history, mode=mode)
        call = {
            "rows": len(rows),
            "mode": mode,
            "style": "gym",
            "nemo_gym": self.python.nemo_gym_version,
            "python": str(self.python.path),
        }
        history.append(SOURCE, "invoke", "collect", call)
        try:
            parallel = next(item.value for item in taken.items if item.key == PARALLEL)
            rollouts = await self._collect(rows, parallel)
        except BaseException as error:
            history.append(SOURCE, "fail", "collect", {"error": root_cause(error)})
            raise
        history.append(SOURCE, "ok", "collect", {"returned": len(rollouts)})
        return rollouts

    async def _collect(self, rows: Sequence[Row], parallel: int | None) -> list[Rollout]:
        """Run the child under ``collect_timeout_s``; it is killed on every way out of here."""
        timeout_s = self.ctx.settings.collect_timeout_s
        request = {"head": self.head, "rows": list(rows), PARALLEL: parallel}
        came_back: dict[int, Rollout] = {}
        with tempfile.TemporaryDirectory(prefix="rollout-chaos-nemo-gym-") as scratch:
            folder = Path(scratch)
            with (folder / "stderr.log").open("wb") as stderr:
                process = await self._spawn(folder, stderr)
                try:
                    async with asyncio.timeout(timeout_s):
                        end = await self._read(process, json.dumps(request).encode(), rows, came_back)
                except TimeoutError:
                    raise CollectionError(
                        f"NeMo Gym's rollout collection of {len(rows)} rows did not finish within "
                        f"collect_timeout_s={timeout_s:g} ({len(came_back)} had come back); it was killed"
                    ) from None
                finally:
                    await _kill(process)
            if end is None:
                raise CollectionError(
                    f"NeMo Gym's rollout collection ({self.program.name} under {self.python.path}) exited "
                    f"with code {process.returncode} before it ended, after {len(came_back)} of "
                    f"{len(rows)} rows; its stderr's last lines:\n{_tail(folder / 'stderr.log')}"
                )
        if "raised" in end:
            raise NemoGymRaisedError(_raised_text(end["raised"], len(came_back), len(rows)))
        return [came_back[position] for position in sorted(came_back)]

    async def _spawn(self, folder: Path, stderr: IO[bytes]) -> Any:
        """Start the child in its own process group, registered with the reaper; a cancel while it
        starts still has it killed once it has started."""
        spawning = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                str(self.python.path),
                str(self.program),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=folder,
                env=_child_env(folder),
                start_new_session=True,
                limit=LINE_LIMIT,
            )
        )
        try:
            process = await asyncio.shield(spawning)
        except asyncio.CancelledError:
            spawning.add_done_callback(_kill_started)
            raise
        reaper().add(process.pid)
        return process

    async def _read(
        self, process: Any, request: bytes, rows: Sequence[Row], came_back: dict[int, Rollout]
    ) -> dict[str, Any] | None:
        """Hand over the rows; turn each result line into a Rollout as it comes; return the last
        line (``done`` or ``raised``), or None when the child's output ended without one."""
        process.stdin.write(request)
        with contextlib.suppress(ConnectionError):  # a child that died early: its output says why
            await process.stdin.drain()
        process.stdin.close()
        while line := await process.stdout.readline():
            answer = json.loads(line)
            if "row" not in answer:
                return dict(answer)
            position = answer["row"]
            rollout = rollout_of(row_index(rows[position], position), answer["result"])
            came_back[position] = rollout
            self.ctx.history.append(
                SOURCE,
                "info",
                "rollout",
                {"row": rollout.row_index, "status": rollout.status, "error": None, "attempts": 1},
            )
        return None


def rollout_of(index: int, result: Mapping[str, Any]) -> Rollout:
    """The Rollout a NeMo Gym ``/run`` result is, by ``results.rollout_from_result``. A result none of
    whose output items carries token ids, or one whose token fields cannot be read, has no Turns: it
    stays what NeMo Gym handed back, one row among the others (``run_examples`` checks no result, so
    reading it here must not end the collection NeMo Gym went on with)."""
    try:
        turns = results.turns_from_result(result)
    except results.MalformedResultError:
        turns = []
    return results.rollout_from_result(index, result, turns=turns)


def settings(ctx: CollectorContext) -> TrainerSettings:
    """What this target hands ``run_examples``: upstream's default concurrency, unless the scenario
    sets it, and the stack's head server."""
    taken = TrainerSettings("nemo_gym", ctx.settings.trainer_config, KNOWN)
    taken.check()
    parallel = taken.default(
        PARALLEL,
        None,
        "nemo_gym/rollout_collection.py SharedRolloutCollectionConfig: no limit (run_from_config "
        "builds run_examples' semaphore from it)",
    )
    if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1):
        raise CollectorTargetError(
            f"workload.trainer_config: nemo_gym.{PARALLEL} must be a positive integer or null "
            f"(NeMo Gym's config: gt=0), got {parallel!r}"
        )
    taken.run("head_server_config", ctx.head_url, "the stack's head server (every server at its link)")
    return taken


def _child_env(folder: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _LEFT_OUT}
    # NeMo Gym puts its Hugging Face cache under the working directory unless told otherwise.
    return {**env, **RAY_ENV, "HF_HOME": str(folder / "hf"), "PYTHONUNBUFFERED": "1"}


async def _kill(process: Any) -> None:
    """SIGKILL the child's whole group, then reap it (a cancel while reaping leaves it killed).
    Once reaped, its pid may be another's: a child that has exited is not signalled."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    reaper().remove(process.pid)
    await process.wait()


def _kill_started(spawning: asyncio.Future[Any]) -> None:
    """Kill the group of a child whose start outlived its cancelled collection."""
    if not spawning.cancelled() and spawning.exception() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(spawning.result().pid, signal.SIGKILL)


def _raised_text(raised: Mapping[str, Any], returned: int, requested: int) -> str:
    where = f" (at {raised['where']})" if raised.get("where") else ""
    causes = "".join(f"; caused by {cause}" for cause in raised.get("causes") or ())
    return (
        f"NeMo Gym's rollout collection raised {raised.get('type')}: {raised.get('message')}{where}"
        f"{causes}; {returned} of {requested} rows had come back"
    )


def _tail(path: Path) -> str:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-STDERR_TAIL_LINES:]
    return "\n".join(lines) or "(nothing)"


factory = NemoGymCollector
"""``--rollout-chaos-target=nemo_gym``; the class is its own factory, so what it declares
(``styles``, ``modes``, ``reaches``) skips early."""
