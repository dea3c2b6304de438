"""A ``members_snapshot``: the run's members that live, read from its container, written to its
stream (at the spawn, at each ``--snapshot-interval``). The members themselves are read by
``containment.members``; collecting the ones that exit is the host's (``reaper``).
"""

from __future__ import annotations

from ..diagnostics import warn
from ..errors import os_error_words
from ..events.base import MembersSnapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from ..containment.members import Member
    from ..events.emitter import Emitter

    class MemberOwner(Protocol):
        """What a snapshot needs of a run (its state is one): where snapshots go and the
        container's members."""

        events: Emitter

        def read_member_list(self) -> list[Member]: ...


def emit_snapshot(run: MemberOwner, reason: str) -> None:
    try:
        found, read_error = run.read_member_list(), False
    except OSError as exc:  # its cause said: a batch short of descriptors meets EMFILE here
        found, read_error = [], True
        warn(f"could not read the container's members: {os_error_words(exc)}")
    run.events.emit(MembersSnapshot(reason=reason, read_error=read_error, members=[m.as_event() for m in found]))
