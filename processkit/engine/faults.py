"""The fault signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL) a process of the runner's may be sent by a
child (``kill -SEGV $PPID``) told apart from the same raised by a real fault: a sent one is dropped,
a real fault still ends the process. The CLI's runner (``run``, ``batch``, ``bench``: every host
that watches its signals, ``signals.watch_for_host``) and the API's service guard them alike."""

from __future__ import annotations

from .. import native
from .. import signum as signals
from ..errors import Failure
from .pump import select_backend

# A Python handler cannot take these (it runs later, so a real fault would run its faulting
# instruction again, for good). Guarded in C where the C module is built and ``PROCESSKIT_PUMP`` is
# not ``python`` (csrc/faults.c: one sent, ``si_code`` <= 0, is dropped; a real fault puts back the
# action before, the default or faulthandler's, and repeats under it). Else blocked
# (``pthread_sigmask``): one sent waits, blocked, for good; a real fault while its signal is blocked
# is delivered by the kernel at its default action all the same, faulthandler's report not written
# (docs/differences.md). Every run's child gets an empty mask (the engine's spawns, the
# service's ``spawned.start``) and, its handler reset by ``execve``, the default action.
FAULTS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL")


def guard_faults() -> None:
    """Drop ``FAULTS`` sent by another process (a child's ``kill -SEGV $PPID``); a real fault ends this process."""
    try:
        chosen = select_backend()  # the pump's switch: the guard is built with it
    except Failure:  # native demanded, not built: each run fails its set-up so (``launch``); the process lives
        chosen = "python"
    built = native.module() if chosen == "native" else None
    if built is not None and built.lib.pk_guard_faults() == 0:
        return
    signals.pthread_sigmask(signals.SIG_BLOCK, signals.named(FAULTS))
