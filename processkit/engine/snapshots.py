"""The container's members, as the stream's snapshots show them and as teardown counts them."""

from __future__ import annotations

from ..diagnostics import warn
from ..events.types import MembersSnapshot
from .state import RunState


def emit_snapshot(run: RunState, reason: str) -> None:
    try:
        found, read_error = run.read_member_list(), False
    except OSError:
        found, read_error = [], True
    if read_error:
        warn("could not read the container's members")
    run.events.emit(MembersSnapshot(reason=reason, read_error=read_error, members=[m.as_event() for m in found]))


def live_members(run: RunState) -> list[int] | None:
    """Members that have not exited yet (zombies awaiting a reaper do not count)."""
    run.reaper.reap()
    try:
        return [m.pid for m in run.read_member_list() if not m.zombie]
    except OSError:
        return None
