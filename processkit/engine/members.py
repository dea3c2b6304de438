"""A run's members that live: the stream's snapshots of them and teardown's counts, read from
its container. (Collecting the ones that exit is the host's: ``reaper``.)
"""

from __future__ import annotations

from ..diagnostics import warn
from ..events.types import MembersSnapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from ..containment.members import Member
    from ..events.emitter import Emitter
    from .reaper import Reaper

    class MemberOwner(Protocol):
        """What the member readers need of a run (its state is one): where snapshots go, the
        process's reaper, and the container's members."""

        events: Emitter
        reaper: Reaper

        def read_member_list(self) -> list[Member]: ...


def emit_snapshot(run: MemberOwner, reason: str) -> None:
    try:
        found, read_error = run.read_member_list(), False
    except OSError:
        found, read_error = [], True
    if read_error:
        warn("could not read the container's members")
    run.events.emit(MembersSnapshot(reason=reason, read_error=read_error, members=[m.as_event() for m in found]))


def live_members(run: MemberOwner) -> list[int] | None:
    """Members that have not exited yet (zombies awaiting a reaper do not count)."""
    run.reaper.reap()
    try:
        return [m.pid for m in run.read_member_list() if not m.zombie]
    except OSError:
        return None
