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


LISTEN_STATE = "0A"  # TCP_LISTEN in /proc/net/tcp's ``st`` column


def _listening_sockets(pid: int) -> dict[str, tuple[str, int]]:
    """Every listening TCP socket of ``pid``'s network namespace: inode -> (address, port)."""
    found: dict[str, tuple[str, int]] = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / str(pid) / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == LISTEN_STATE:
                found[fields[9]] = _address(fields[1])
    return found


def _address(text: str) -> tuple[str, int]:
    """``0100007F:1F90`` -> ``("127.0.0.1", 8080)``: the kernel prints each 32-bit word in host order."""
    hex_address, _, hex_port = text.partition(":")
    raw = b"".join(bytes.fromhex(hex_address[i : i + 8])[::-1] for i in range(0, len(hex_address), 8))
    if len(raw) == 16 and raw[:12] == b"\0" * 10 + b"\xff\xff":  # an IPv4-mapped IPv6 address
        raw = raw[12:]
    if len(raw) == 4:
        return ".".join(str(byte) for byte in raw), int(hex_port, 16)
    import ipaddress

    return str(ipaddress.IPv6Address(raw)), int(hex_port, 16)


def listening(pid: int) -> set[tuple[str, int]]:
    """The (address, port) pairs ``pid`` listens on: its socket descriptors matched against the
    kernel's TCP tables; empty when it is gone or its descriptors cannot be read."""
    sockets = _listening_sockets(pid)
    found: set[tuple[str, int]] = set()
    try:
        descriptors = list((PROC / str(pid) / "fd").iterdir())
    except OSError:
        return found
    for descriptor in descriptors:
        try:
            target = descriptor.readlink().name
        except OSError:
            continue
        if target.startswith("socket:[") and (inode := target[8:-1]) in sockets:
            found.add(sockets[inode])
    return found
