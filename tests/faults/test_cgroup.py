"""Reading the kernel's cgroup tables, for the oom fault: v2, v1 and hybrid layouts.

The texts are what ``/proc/self/mountinfo`` and ``/proc/<pid>/cgroup`` contain on such hosts;
the machine running the tests has only one layout, so the others are checked here; likewise the
``/proc/<pid>/maps`` lines the oom fault writes back, and the kernel's counter files.
"""

from __future__ import annotations

from pathlib import Path

from pytest_rollout_chaos.faults._cgroup import (
    _counter,
    parse_membership,
    parse_mounts,
    parse_read_only_file_ranges,
)

V2_MOUNTINFO = (
    "25 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
    "26 30 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
)
HYBRID_MOUNTINFO = (
    "31 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n"
    "35 25 0:30 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
    "36 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
)


def test_v2_only_host() -> None:
    assert parse_mounts(V2_MOUNTINFO) == {"cgroup2": Path("/sys/fs/cgroup")}
    assert parse_membership("0::/user.slice/session-3.scope\n") == {"": "/user.slice/session-3.scope"}


def test_hybrid_host_names_both_hierarchies() -> None:
    assert parse_mounts(HYBRID_MOUNTINFO) == {
        "cgroup2": Path("/sys/fs/cgroup/unified"),
        "memory": Path("/sys/fs/cgroup/memory"),
    }
    membership = parse_membership("5:cpu,cpuacct:/\n4:memory:/jobs/abc\n0::/\n")
    assert membership == {"memory": "/jobs/abc", "": "/"}


def test_garbage_lines_are_ignored() -> None:
    assert parse_mounts("nonsense\n\n") == {}
    assert parse_membership("broken line\n") == {}


MAPS = (
    "55d0c0a00000-55d0c0a2c000 r--p 00000000 fd:01 1234  /usr/bin/python3.11\n"
    "55d0c0a2c000-55d0c0d0e000 r-xp 0002c000 fd:01 1234  /usr/bin/python3.11\n"
    "55d0c0f00000-55d0c0f10000 rw-p 00300000 fd:01 1234  /usr/bin/python3.11\n"
    "55d0c2000000-55d0c2400000 rw-p 00000000 00:00 0     [heap]\n"
    "7f0000000000-7f0000200000 r--s 00000000 00:05 77    /dev/shm/shared segment\n"
    "7f0000200000-7f0000300000 r--p 00000000 00:00 0 \n"
    "7f0000300000-7f0000301000 ---p 00000000 fd:01 99    /usr/lib/libc.so.6\n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0     [stack]\n"
    "7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0     [vdso]\n"
)


def test_only_private_read_only_file_pages_are_written_back() -> None:
    assert parse_read_only_file_ranges(MAPS) == [
        (0x55D0C0A00000, 0x55D0C0A2C000),
        (0x55D0C0A2C000, 0x55D0C0D0E000),
    ]


def test_counters_of_v1_and_v2_files() -> None:
    v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
    v2 = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 1\n"
    assert (_counter(v1, "oom_kill"), _counter(v2, "oom_kill"), _counter(v2, "absent")) == (3, 2, None)
