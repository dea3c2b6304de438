"""Reads process facts from /proc: who is alive, their parent, name and start-time token."""

from __future__ import annotations

import os

from ..plain import Plain


class Member(Plain):
    __slots__ = ("pid", "ppid", "name", "start_time", "pgid", "zombie", "session")

    def __init__(
        self,
        pid: int,
        ppid: int | None,
        name: str | None,
        start_time: str | None,  # the kernel's start time in clock ticks, as an opaque decimal token
        pgid: int | None = None,
        zombie: bool = False,
        session: int | None = None,
    ):
        self.pid = pid
        self.ppid = ppid
        self.name = name
        self.start_time = start_time
        self.pgid = pgid
        self.zombie = zombie
        self.session = session

    def as_event(self) -> dict:
        return {"pid": self.pid, "ppid": self.ppid, "name": self.name, "start_time": self.start_time}


def read_member(pid: int) -> Member | None:
    """The process's facts, or None when it is already gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return Member(pid, None, None, None)
    # comm may contain spaces and parentheses: it ends at the last ')'.
    open_paren = raw.find(b"(")
    close_paren = raw.rfind(b")")
    name = raw[open_paren + 1 : close_paren].decode("utf-8", "replace")
    fields = raw[close_paren + 2 :].split()
    # fields[0] is state (stat field 3); ppid is field 4, pgrp 5, session 6, starttime 22.
    return Member(
        pid=pid,
        ppid=int(fields[1]),
        name=name,
        start_time=fields[19].decode(),
        pgid=int(fields[2]),
        zombie=fields[0] == b"Z",
        session=int(fields[3]),
    )


class Usage(Plain):
    """What live processes have used: the sum of their resident high-water marks (VmHWM) and of
    their user+system CPU. None when no live process could be measured."""

    __slots__ = ("peak_memory_bytes", "total_cpu_ms")

    def __init__(self, peak_memory_bytes: int | None, total_cpu_ms: int | None):
        self.peak_memory_bytes = peak_memory_bytes
        self.total_cpu_ms = total_cpu_ms


def usage_of(pids: list[int]) -> Usage:
    """Summed from /proc over the processes still alive (zombies have no memory left)."""
    memory = cpu_ticks = None
    for pid in sorted(set(pids)):
        try:
            with open(f"/proc/{pid}/status", "rb") as handle:
                status = handle.read()
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat_fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone (or unreadable) between the listing and the read
        hwm = next((line.split()[1] for line in status.splitlines() if line.startswith(b"VmHWM:")), None)
        if hwm is None:  # a zombie or a kernel thread: no address space to measure
            continue
        memory = (memory or 0) + int(hwm) * 1024
        # stat fields after the name: state is [0], utime [11], stime [12] (clock ticks).
        cpu_ticks = (cpu_ticks or 0) + int(stat_fields[11]) + int(stat_fields[12])
    cpu_ms = None if cpu_ticks is None else cpu_ticks * 1000 // os.sysconf("SC_CLK_TCK")
    return Usage(memory, cpu_ms)


def read_members(pids: list[int]) -> list[Member]:
    members = (read_member(pid) for pid in sorted(set(pids)))
    return [m for m in members if m is not None]


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]
