"""The children spawned whose exec is not yet reported: roots to be, which no sweep of orphans
may collect (``reaper.Reaper.reap``), or a run would never see its root's exit; and the
runner's own children whose status their spawner reads (the batch's page process).

A module of its own, below both: the native spawn (``spawn_native.Pending``) claims across the
loop turns it waits for the exec, and the reaper, which names the spawn's ``Child``, asks.
"""

from __future__ import annotations

import _thread

_CLAIMED: set[int] = set()
_LOCK = _thread.allocate_lock()  # the builtin lock: no start-up import (hosts may run on threads)


def claim(pid: int) -> None:
    """``pid`` is a child between its clone and the report of its exec."""
    with _LOCK:
        _CLAIMED.add(pid)


def unclaim(pid: int) -> None:
    """The exec of ``pid`` is reported: its run watches it now, or it failed and was reaped."""
    with _LOCK:
        _CLAIMED.discard(pid)


def claimed(pid: int) -> bool:
    with _LOCK:
        return pid in _CLAIMED
