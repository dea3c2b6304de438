"""The signals a child of the runner service, or of a process it starts (a batch's, a
benchmark's: ``spawned``), may send "its parent" (the caller it would have under subprocess):
caught and dropped, so one stray signal never ends that process and every run it carries. The
signals a fault raises are told apart from the same sent by ``kill`` (``guard_faults``): a sent
one is dropped, a real fault still ends the process."""

from __future__ import annotations

import signal

from .. import native
from ..engine.pump import select_backend
from ..engine.signals import drop_strays
from ..errors import Failure

# The signals a child may send "its parent" are dropped as the CLI's runner drops them (``engine.signals``:
# ``STRAY_SIGNALS``, the comment there says which and why). SIGSEGV, SIGBUS, SIGFPE and SIGILL, which a Python
# handler cannot take (a real fault would run its faulting instruction again, for good), are guarded here (``FAULTS``).
# Guarded where the C module is built and ``PROCESSKIT_PUMP`` is not ``python`` (csrc/faults.c: one sent, ``si_code``
# <= 0, is dropped; a real fault puts back the action before, the default or faulthandler's, and repeats under it).
# Else blocked (``pthread_sigmask``): one sent waits, blocked, for good; a real fault while its signal is blocked is
# delivered by the kernel at its default action all the same, faulthandler's report not written (docs/differences.md).
# Every child the service starts gets an empty mask (the engine's spawns, ``spawned.start``) and its default action.
FAULTS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL")


def guard_faults() -> None:
    """Drop ``FAULTS`` sent by another process (a child's ``kill -SEGV $PPID``); a real fault ends this process."""
    try:
        chosen = select_backend()  # the pump's switch: the guard is built with it
    except Failure:  # native demanded, not built: each run fails its set-up so (``launch``); the service lives
        chosen = "python"
    built = native.module() if chosen == "native" else None
    if built is not None and built.lib.pk_guard_faults() == 0:
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, [getattr(signal, name) for name in FAULTS])


def absorb(also: tuple[str, ...] = ()) -> None:
    """Catch and drop ``engine.signals.STRAY_SIGNALS``, ``also`` and the real-time signals (each
    with its default action), and guard ``FAULTS``."""
    guard_faults()
    drop_strays(also)
