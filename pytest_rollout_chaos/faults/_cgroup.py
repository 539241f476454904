"""The oom fault's memory cage: a cgroup with a memory limit, and the pages that overflow it.

``create_cage`` makes a child memory cgroup (v2 ``memory.max``, else v1
``memory.limit_in_bytes``) next to the server's own. Moving a running process there does not
bring its memory along: the kernel charges pages to the cgroup that first touched them (v2
never moves charges; v1's ``memory.move_charge_at_immigrate`` is refused by kernels that
dropped it), so the cage starts empty whatever the server holds, and a cage limited to 0
bytes is over its limit at the server's next new page.

``copy_on_write`` supplies that page from outside, with no help from the server: it writes
the server's read-only file pages (its code, read-only data) back to themselves through
``/proc/<pid>/mem``. The bytes stay the same, so the server cannot tell; but the kernel must
give the server a private copy of each page, and charges that copy to the server's cgroup.
The kernel's ``oom_kill`` counter (v2 ``memory.events``, v1 ``memory.oom_control``) then
says whether the kernel's OOM killer acted. Anything not permitted raises
``CgroupUnavailable`` with the reason, and the fault falls back to SIGKILL and says so.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


class CgroupUnavailable(Exception):
    """No memory cage can be made or used here; the message says why."""


@dataclass(frozen=True, slots=True)
class MemoryCage:
    """A child memory cgroup with a limit."""

    path: Path
    version: Literal[1, 2]

    def move(self, pid: int) -> None:
        """Move ``pid`` (all its threads) into the cage; ``OSError`` as the kernel says."""
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def pids(self) -> list[int]:
        return [int(line) for line in _read(self.path / "cgroup.procs").split()]

    def oom_kills(self) -> int | None:
        """The kernel's count of OOM kills in this cgroup, or None when it does not say."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _counter(_read(self.path / name), "oom_kill")

    def limit_bytes(self) -> int | None:
        name = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        text = _read(self.path / name).strip()
        return int(text) if text.isdigit() else None

    def remove(self, *, timeout_s: float = 5.0) -> None:
        """Remove the cgroup once it is empty; ``CgroupUnavailable`` naming it after ``timeout_s``.

        Processes still inside after half the time (they should have been killed) are moved
        to the parent cgroup, so that the cage itself never outlives the fault.
        """
        deadline = time.monotonic() + timeout_s
        evicted = False
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as error:
                now = time.monotonic()
                if not evicted and now >= deadline - timeout_s / 2:
                    evicted = True
                    for pid in self.pids():
                        with contextlib.suppress(OSError):
                            (self.path.parent / "cgroup.procs").write_text(f"{pid}\n")
                if now >= deadline:
                    raise CgroupUnavailable(
                        f"cannot remove {self.path} after {timeout_s:.1f}s: {error} "
                        f"(pids still inside: {self.pids() or 'none'})"
                    ) from None
                time.sleep(0.02)


def create_cage(pid: int, name: str, limit_bytes: int) -> MemoryCage:
    """A memory cgroup named ``name`` next to ``pid``'s own, limited to ``limit_bytes``, no swap."""
    mounts = parse_mounts(_read(Path("/proc/self/mountinfo")))
    membership = parse_membership(_read(Path(f"/proc/{pid}/cgroup")))
    if not membership:
        raise CgroupUnavailable(f"cannot read the cgroups of pid {pid} from /proc/{pid}/cgroup")
    reasons: list[str] = []
    v2_root = mounts.get("cgroup2")
    if v2_root is not None and "" in membership:
        try:
            return _create_v2(v2_root, membership[""], name, limit_bytes)
        except CgroupUnavailable as why:
            reasons.append(f"v2: {why}")
    v1_root = mounts.get("memory")
    if v1_root is not None and "memory" in membership:
        try:
            return _create_v1(v1_root / membership["memory"].lstrip("/"), name, limit_bytes)
        except CgroupUnavailable as why:
            reasons.append(f"v1: {why}")
    if not reasons:
        reasons.append("no cgroup v2 or v1 memory hierarchy is mounted")
    raise CgroupUnavailable("; ".join(reasons))


def _create_v2(root: Path, own: str, name: str, limit_bytes: int) -> MemoryCage:
    if "memory" not in _read(root / "cgroup.controllers").split():
        raise CgroupUnavailable(f"the memory controller is not available in {root}")
    own_dir = root / own.lstrip("/")
    bases = [own_dir, own_dir.parent, root]
    for base in dict.fromkeys(bases):  # in order, without repeats
        if not _enable_memory(base):
            continue
        cage = base / name
        try:
            cage.mkdir()  # never one that exists: it is not ours to limit or remove
        except OSError as error:
            raise CgroupUnavailable(f"cannot make {cage}: {error}") from None
        try:
            (cage / "memory.max").write_text(f"{limit_bytes}\n")
            with contextlib.suppress(OSError):
                (cage / "memory.swap.max").write_text("0\n")
            with contextlib.suppress(OSError):
                (cage / "memory.oom.group").write_text("1\n")  # the whole server dies, as with OOM in a pod
        except OSError as error:
            with contextlib.suppress(OSError):
                cage.rmdir()
            raise CgroupUnavailable(f"cannot set up {cage}: {error}") from None
        return MemoryCage(cage, 2)
    raise CgroupUnavailable(f"cannot enable the memory controller below {own_dir} or its parents")


def _create_v1(own_dir: Path, name: str, limit_bytes: int) -> MemoryCage:
    cage = own_dir / name
    try:
        cage.mkdir()  # never one that exists: it is not ours to limit or remove
    except OSError as error:
        raise CgroupUnavailable(f"cannot make {cage}: {error}") from None
    try:
        (cage / "memory.limit_in_bytes").write_text(f"{limit_bytes}\n")
        # memory+swap no higher than memory: reclaim cannot swap the overflow out instead
        with contextlib.suppress(OSError):
            (cage / "memory.memsw.limit_in_bytes").write_text(f"{limit_bytes}\n")
        with contextlib.suppress(OSError):
            (cage / "memory.swappiness").write_text("0\n")
        if _counter(_read(cage / "memory.oom_control"), "oom_kill_disable"):
            (cage / "memory.oom_control").write_text("0\n")  # inherited: would freeze, not kill
    except OSError as error:
        with contextlib.suppress(OSError):
            cage.rmdir()
        raise CgroupUnavailable(f"cannot set up {cage}: {error}") from None
    return MemoryCage(cage, 1)


def _enable_memory(base: Path) -> bool:
    control = base / "cgroup.subtree_control"
    if "memory" in _read(control).split():
        return True
    try:
        control.write_text("+memory\n")
    except OSError:
        return False
    return "memory" in _read(control).split()


@dataclass(frozen=True, slots=True)
class Copied:
    """What ``copy_on_write`` did: pages it wrote back (or tried to), the first write refused."""

    pages: int
    refused: OSError | None


def copy_on_write(pid: int, *, done: Callable[[], bool], max_pages: int, deadline: float) -> Copied:
    """Make ``pid`` take private copies of its read-only file pages until ``done()`` says stop.

    Each page of a private, non-writable, file-backed mapping is read and written back
    unchanged through ``/proc/<pid>/mem``; the write makes the kernel copy the page for
    ``pid`` and charge the copy to ``pid``'s memory cgroup. The process never writes these
    pages itself, so writing their own bytes back races with nothing. ``done`` is asked after
    every page (and a refused write is no reason to stop by itself: the kernel refuses the
    write whose copy it could not charge). ``CgroupUnavailable`` when ``/proc/<pid>/mem``
    cannot be opened for writing.
    """
    ranges = read_only_file_ranges(pid)
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDWR)
    except OSError as error:
        raise CgroupUnavailable(f"cannot open /proc/{pid}/mem for writing: {error}") from None
    pages = 0
    refused: OSError | None = None
    try:
        for start, end in ranges:
            for address in range(start, end, PAGE_SIZE):
                if pages >= max_pages or done() or time.monotonic() >= deadline:
                    return Copied(pages, refused)
                pages += 1
                try:
                    os.pwrite(fd, os.pread(fd, PAGE_SIZE, address), address)
                except OSError as error:
                    refused = refused or error
    finally:
        os.close(fd)
    return Copied(pages, refused)


def read_only_file_ranges(pid: int) -> list[tuple[int, int]]:
    """``(start, end)`` of ``pid``'s private, readable, non-writable mappings of files."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError as error:
        raise CgroupUnavailable(f"cannot read /proc/{pid}/maps: {error}") from None
    return parse_read_only_file_ranges(maps)


def parse_read_only_file_ranges(maps: str) -> list[tuple[int, int]]:
    """The ranges ``read_only_file_ranges`` takes, from the text of ``/proc/<pid>/maps``."""
    ranges = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue  # anonymous, [heap], [stack], [vdso] ...: no file behind it
        perms = fields[1]
        if perms[0] != "r" or perms[1] != "-" or perms[3] != "p":
            continue
        start, _, end = fields[0].partition("-")
        ranges.append((int(start, 16), int(end, 16)))
    return ranges


def resident_bytes(pid: int) -> int | None:
    """``pid``'s resident set size (``VmRSS``), or None when it cannot be read."""
    for line in _read(Path(f"/proc/{pid}/status")).splitlines():
        key, _, value = line.partition(":")
        if key == "VmRSS" and value.split():
            return int(value.split()[0]) * 1024
    return None


def parse_mounts(mountinfo: str) -> dict[str, Path]:
    """``{"cgroup2": path, "memory": path}`` for the hierarchies ``/proc/self/mountinfo`` lists."""
    mounts: dict[str, Path] = {}
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, extra = left.split(), right.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        if extra[0] == "cgroup2":
            mounts.setdefault("cgroup2", Path(fields[4]))
        elif extra[0] == "cgroup" and "memory" in extra[2].split(","):
            mounts.setdefault("memory", Path(fields[4]))
    return mounts


def parse_membership(proc_cgroup: str) -> dict[str, str]:
    """From ``/proc/<pid>/cgroup``: ``""`` -> the v2 path, ``"memory"`` -> the v1 memory path."""
    found: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            found[""] = path
        elif "memory" in controllers.split(","):
            found["memory"] = path
    return found


def _counter(text: str, key: str) -> int | None:
    """``value`` of the ``key value`` line in a cgroup file, or None when there is none."""
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
