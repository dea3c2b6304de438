"""A runner service stopped by a signal, continued by its caller. Any process of the caller's
user can stop the service: a child of its own (the service is its parent) with SIGSTOP, which
nothing catches, and every call of every thread of the caller then hung, a call with
``timeout=`` too (the service keeps that time, and a stopped process keeps none). A waiting
call's reader looks at its service whenever no frame has come for ``WATCH_SECONDS`` and
continues it (SIGCONT): the service is the caller's own, and the caller did not stop it. That
time is counted across waits (``Connection.heard``), not within one: a caller that polls
(``wait(timeout=0.5)`` in a loop, ``poll()``) never waits that long at once, and its service,
stopped, was never looked at.

Why continue it rather than raise: every thread's calls wait on the one service, and a call
that raised would leave it stopped for the others, and for every call without a timeout. A stop
of the caller's job (Ctrl-Z, SIGTSTP to the process group the service shares) stops the caller
too, so it never looks, and the job's continuation continues both; a tracer's stop (state ``t``:
root's debugger, the only one that can attach to the service, which is not dumpable) is left
alone."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from ..containment.members import read_stat

# How long a call's reader waits on the socket before it looks whether its service was stopped:
# a call never waits on a stopped service much longer than this.
WATCH_SECONDS = 1.0


def look(connection) -> None:
    """The service of ``connection`` (a ``service.Connection``, not imported: it imports this)
    continued if a signal stopped it, once no frame came from it for ``WATCH_SECONDS`` (an empty
    read of its socket just now: at most once that long); only by the process that started it
    (a fork's inherited connection is not its own)."""
    now = time.monotonic()
    if now - connection.heard < WATCH_SECONDS:
        return
    connection.heard = now  # looked: the next look is as far on
    if connection.owner == os.getpid() and connection.process.returncode is None:
        resume(connection.process.pid)


def state(pid: int) -> bytes | None:
    """The one-letter state of ``pid`` (``/proc/<pid>/stat``'s third field), None if unreadable."""
    try:
        fields = read_stat(pid)[1]
    except OSError:
        return None
    return fields[0] if fields else None


def resume(pid: int) -> bool:
    """Continue ``pid`` (the caller's own service, not yet waited for, so its pid is its own)
    when a signal stopped it; whether it did."""
    if state(pid) != b"T":
        return False
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError:
        return False
    return True


def collect(process: subprocess.Popen, seconds: float, continues: bool) -> None:
    """``process`` (the caller's own service) waited for up to ``seconds`` (``TimeoutExpired`` past
    them). ``continues``: a given-up service must see its socket's end, so it is continued if a
    signal stopped it, at once and again each ``WATCH_SECONDS``: a stop sent before the first look
    may take effect after it (the stopped process not yet run on a loaded host), or another may
    come, and a service stopped then never ended, its runs left running."""
    deadline = time.monotonic() + seconds
    while True:
        if continues and process.returncode is None:  # not yet waited for: its pid still its own
            resume(process.pid)
        left = deadline - time.monotonic()
        try:
            process.wait(min(left, WATCH_SECONDS) if continues else left)
            return
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
