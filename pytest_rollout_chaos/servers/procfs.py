"""What ``/proc`` says about processes: state, process group members, descendants.

The supervisor, the process faults and the Ray cluster look at processes they did not start
themselves (a server's children, Ray's workers); this reads the kernel's own record of them.
"""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the parenthesised command: state, ppid, pgrp, ..."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def process_state(pid: int) -> str | None:
    """The kernel's one-letter state of ``pid`` (``T`` = stopped, ``Z`` = zombie), or None when gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def alive(pid: int) -> bool:
    """Running or stopped, not gone and not a zombie waiting to be reaped."""
    return process_state(pid) not in (None, "Z", "X")


def _all_fields() -> dict[int, list[str]]:
    found = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(entry.name)) is not None and len(fields) > 2:
            found[int(entry.name)] = fields
    return found


def group_pids(pgid: int) -> list[int]:
    """Every live process in process group ``pgid`` (a server and its children)."""
    return sorted(pid for pid, fields in _all_fields().items() if int(fields[2]) == pgid)


def descendant_pids(pid: int) -> set[int]:
    """Every process below ``pid``, whatever group or session it started for itself."""
    children: dict[int, list[int]] = {}
    for child, fields in _all_fields().items():
        children.setdefault(int(fields[1]), []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found
