"""A fork of the caller while another of its threads imports a module of processkit's (a first
call's lazy imports, tens of milliseconds): the child inherits that module half made, its lock
held by a thread the child does not have, and its first call waited on that lock for ever.
Before each ``os.fork`` the forking thread waits for every such import to end (``__import__`` of
a module another thread initializes waits on its lock), then holds the interpreter's import lock
(no import can begin) and forks only once none is under way, so the child has each whole. Only
processkit's own modules, which take no lock of the caller's as they load: an import of the
caller's own is never waited for, as a fork never waited for one before."""

from __future__ import annotations

import os
import sys

import _imp

ROUNDS = 1000  # an import that never ends (its module's code waits on the forking thread) is not waited for past these
_held: list[bool] = []  # the import lock is this hook's until the fork is over


def _loading(own: set[str]) -> list[str]:
    """processkit's modules whose import is under way, but those of ``own`` (this thread's: a fork made as one loads)."""
    return [
        name
        for name, module in list(sys.modules.items())
        if name.partition(".")[0] == "processkit"
        and name not in own
        and getattr(getattr(module, "__spec__", None), "_initializing", False)
    ]


def _before() -> None:
    own: set[str] = set()
    for _ in range(ROUNDS):
        for under_way in _loading(own):
            try:
                __import__(under_way)  # waits for the thread that imports it; this thread's own returns at once
            except Exception:  # noqa: BLE001 - its import failed, or a lock cycle with this thread's own import
                pass
            if under_way in _loading(set()):
                own.add(under_way)
        _imp.acquire_lock()
        if not _loading(own):
            _held.append(True)
            return
        _imp.release_lock()


def _after() -> None:
    if _held:
        _held.clear()
        try:
            _imp.release_lock()
        except RuntimeError:  # an interpreter that gives the child a fresh import lock
            pass


os.register_at_fork(before=_before, after_in_parent=_after, after_in_child=_after)
