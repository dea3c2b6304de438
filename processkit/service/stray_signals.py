"""The signals a child of the runner service, or of a process it starts (a batch's, a
benchmark's: ``spawned``), may send "its parent" (the caller it would have under subprocess):
caught and dropped, so one stray signal never ends that process and every run it carries. The
signals a fault raises are told apart from the same sent by ``kill`` (``guard_faults``): a sent
one is dropped, a real fault still ends the process."""

from __future__ import annotations

import signal

from .. import native
from ..engine.pump import select_backend
from ..errors import Failure

# Signals whose default action ends a process and that no fault of its own raises, and that no terminal sends: a
# child (the caller's user, with the service as its parent) may send one meant for "its parent", the caller it would
# have under subprocess (a readiness or a timer signal), and it ended the service and every run it carried. They are
# caught and dropped (a caught signal is back at its default in every child the service starts). One inherited as
# ignored stays ignored. SIGQUIT keeps its default, as the CLI's runner does. So are the signals a fault raises whose
# catching still ends the process that raised them, or lets it go on sound, sent by a child just as well: SIGABRT
# (``abort`` raises it again at its default), SIGXCPU (the kernel's SIGKILL follows at the hard CPU limit), SIGTRAP
# and SIGSYS (the instruction or system call passed over, not run again). SIGSEGV, SIGBUS, SIGFPE and SIGILL are
# not: a Python handler runs later, so a real fault would run its faulting instruction again, for good (``FAULTS``).
STRAY_SIGNALS = (
    "SIGUSR2",
    "SIGALRM",
    "SIGVTALRM",
    "SIGPROF",
    "SIGIO",
    "SIGPWR",
    "SIGSTKFLT",
    "SIGABRT",
    "SIGXCPU",
    "SIGTRAP",
    "SIGSYS",
)


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
    """Catch and drop ``STRAY_SIGNALS``, ``also`` and the real-time signals (each with its default
    action), and guard ``FAULTS``."""
    guard_faults()
    numbers = [getattr(signal, name) for name in (*STRAY_SIGNALS, *also) if hasattr(signal, name)]
    numbers += range(signal.SIGRTMIN, signal.SIGRTMAX + 1)
    for number in numbers:
        if signal.getsignal(number) == signal.SIG_DFL:
            signal.signal(number, _dropped)


def _dropped(number, frame) -> None:
    """A stray signal's handler: nothing to do (the signal watch's wake-up ignores its number)."""
