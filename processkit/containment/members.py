"""Reads process facts from /proc: who is alive, their parent, name and start-time token."""

from __future__ import annotations

import os
from typing import NamedTuple


class Member(NamedTuple):
    pid: int
    ppid: int | None
    name: str | None
    start_time: str | None  # the kernel's start time in clock ticks, as an opaque decimal token
    pgid: int | None = None
    zombie: bool = False
    session: int | None = None

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


def read_members(pids: list[int]) -> list[Member]:
    members = (read_member(pid) for pid in sorted(set(pids)))
    return [m for m in members if m is not None]


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]
