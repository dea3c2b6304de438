"""The runner service's process made its own before it serves (``serve.main``): told of its
caller's end, alone with its memfds, deaf to the signals a child sends "its parent", working
from ``/`` with its own umask and its raised open-file limit, and quiet but for its replies."""

from __future__ import annotations

import os
import signal

from .. import fdlimit, mountinfo, rlimits
from ..containment import prctl
from ..diagnostics import envelope_only
from . import scratch, stray_signals


def made_own(caller: int, fd: int) -> list[bool] | None:
    """The service's process set up for ``caller`` (whose socket is ``fd``); the list its
    parent-death signal fills (it may come before the service exists); None: its caller is gone."""
    orphaned: list[bool] = []
    signal.signal(signal.SIGUSR1, lambda number, frame: orphaned.append(True))
    prctl.set_parent_death_signal(signal.SIGUSR1)
    if prctl.parent_gone(caller, fd, hung_up=True):
        return None
    if os.getpid() == 1:  # forked first into a pid namespace its caller is not in
        mountinfo.caller_is_outside()
    prctl.set_not_dumpable()  # so no call's child opens another call's memfds through /proc (threat-model.md)
    stray_signals.absorb()
    os.chdir("/")
    os.umask(scratch.OWN_UMASK)  # its own files' modes; each run's child and named files take its caller's
    rlimits.note_own()  # what its runs' children inherit: only the caller's limits that differ are set
    fdlimit.raise_soft_limit()  # its runs' children get the caller's soft limit back
    envelope_only()  # warnings have no reader here: a run's failure travels in its reply
    return orphaned
