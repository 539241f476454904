"""FileMirror: the logs and events of servers on nodes that share no files with pytest, copied over Ray.

A server writes its log and its events file under the run's log directory on its own node
(``hosts:N``: the host's private tmpfs; a joined node on another machine: its own disk). One
``FileServer`` actor per such node reads what those files gained since the last read, and the
mirror appends it to the files of the same names under the driver's log directory, where the
History, the log tails and the reports read them as they read a local server's. Nothing is shared
but the network.

``pull`` is called before every read of the History (``History.pull_with``), so whoever got a
server's answer reads what the server recorded before answering, as on one machine (the servers
write their events before an answer leaves). A background thread pulls every ``PERIOD_S`` too,
so the copies stay close when nobody reads. A node that does not answer (lost, silenced) is not
waited for again until its pending read returns: one slow pull, not one per read; when its
``FileServer`` died with the node, the next pull starts a new one there once the node is back, and
its files are read from the start (a host booted again has an empty ``/tmp``). A node a fault
removes is not read at all until it is back (``set_down``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

_logger = logging.getLogger(__name__)

SUFFIXES: Final = (".log", ".jsonl")  # logs and events files; ready files and configs stay put
READ_LIMIT: Final = 8 * 1024 * 1024  # bytes of one file per read; the rest comes with the next
PULL_S: Final = 2.0  # how long a pull waits for a node's answer before going on without it
PERIOD_S: Final = 0.5


class FileServer:
    """On a node: the new bytes of the logs and events files in one directory of that node."""

    def read(self, directory: str, offsets: Mapping[str, int]) -> dict[str, bytes]:
        """Each file's bytes from its offset in ``offsets`` (0 for one not named), up to ``READ_LIMIT``."""
        found: dict[str, bytes] = {}
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            return found
        for entry in entries:
            if not entry.name.endswith(SUFFIXES):
                continue
            offset = offsets.get(entry.name, 0)
            with contextlib.suppress(OSError), open(entry.path, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read(READ_LIMIT)
                if chunk:
                    found[entry.name] = chunk
        return found


@dataclass
class _Node:
    """One node's reader, the offsets it has read to, and its read in flight (if any)."""

    options: dict[str, Any]
    actor: Any = None
    offsets: dict[str, int] = field(default_factory=dict)
    pending: Any = None  # the ObjectRef of a read not answered yet
    down: bool = False  # removed on purpose (a fault): not read until it is back


class FileMirror:
    """Copies the files of ``nodes`` (each given as the Ray options that place an actor on it)
    under ``directory`` there into ``directory`` here; see the module docstring."""

    def __init__(self, directory: Path, nodes: Mapping[int, dict[str, Any]]) -> None:
        self.directory = directory
        self._nodes = {index: _Node(dict(options)) for index, options in nodes.items()}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ray-file-mirror", daemon=True)

    @property
    def nodes(self) -> Sequence[int]:
        return tuple(self._nodes)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def pull(self, timeout_s: float = PULL_S) -> None:
        """Bring here what the nodes' files gained; never raises (a node that fails is tried again)."""
        if self._closed.is_set():
            return
        try:
            with self._lock:
                self._pull(timeout_s)
        except Exception:  # Ray shut down under us, or a node went: the next pull tries again
            _logger.debug("pulling the nodes' files failed", exc_info=True)

    def _pull(self, timeout_s: float) -> None:
        import ray

        # Every node gets a read sent now: one answered earlier may predate what the caller needs.
        # A node whose earlier read is still unanswered does not answer now: it is not waited for.
        fresh = []
        for node in self._nodes.values():
            if node.down:
                continue
            if node.pending is not None and ray.wait([node.pending], timeout=0)[0]:
                self._take(node)
            if node.pending is not None:
                continue
            if node.actor is None:
                node.actor = (
                    ray.remote(FileServer).options(num_cpus=0, max_restarts=0, **node.options).remote()
                )
                node.offsets = {}  # a new reader: a node started again, whose files start again
            node.pending = node.actor.read.remote(str(self.directory), dict(node.offsets))
            fresh.append(node)
        if fresh:
            ray.wait([node.pending for node in fresh], num_returns=len(fresh), timeout=timeout_s)
        for node in fresh:
            if ray.wait([node.pending], timeout=0)[0]:
                self._take(node)

    def set_down(self, index: int, down: bool) -> None:
        """Stop reading node ``index`` (a fault removed it; its reader went with it), or read it again."""
        with self._lock:
            node = self._nodes.get(index)
            if node is not None:
                node.down = down
                if down:
                    node.actor = node.pending = None

    def _take(self, node: _Node) -> None:
        import ray

        ref, node.pending = node.pending, None
        try:
            chunks: dict[str, bytes] = ray.get(ref, timeout=0)
        except ray.exceptions.RayActorError:  # the node went, its reader with it
            node.actor = None
            return
        for name, chunk in chunks.items():
            with (self.directory / name).open("ab") as handle:
                handle.write(chunk)
            node.offsets[name] = node.offsets.get(name, 0) + len(chunk)

    def _run(self) -> None:
        while not self._closed.wait(PERIOD_S):
            self.pull()

    def close(self) -> None:
        """A last pull, then stop pulling and end the readers."""
        self.pull()
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(timeout=PULL_S + 1.0)
        import ray

        with self._lock:
            for node in self._nodes.values():
                if node.actor is not None:
                    with contextlib.suppress(Exception):
                        ray.kill(node.actor, no_restart=True)
                node.actor = node.pending = None
