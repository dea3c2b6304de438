"""The signals a child of the runner service may send "its parent" (the caller it would have
under subprocess): caught and dropped, so one stray signal never ends the service and every run
it carries."""

from __future__ import annotations

import signal

# Signals whose default action ends a process and that no fault of its own raises, and that no terminal sends: a
# child (the caller's user, with the service as its parent) may send one meant for "its parent", the caller it would
# have under subprocess (a readiness or a timer signal), and it ended the service and every run it carried. They are
# caught and dropped (a caught signal is back at its default in every child the service starts). One inherited as
# ignored stays ignored. SIGQUIT keeps its default, as the CLI's runner does. So are the signals a fault raises whose
# catching still ends the process that raised them, or lets it go on sound, sent by a child just as well: SIGABRT
# (``abort`` raises it again at its default), SIGXCPU (the kernel's SIGKILL follows at the hard CPU limit), SIGTRAP
# and SIGSYS (the instruction or system call passed over, not run again). SIGSEGV, SIGBUS, SIGFPE and SIGILL are
# not: a caught one would run its faulting instruction again, for good.
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


def absorb() -> None:
    """Catch and drop ``STRAY_SIGNALS`` and the real-time signals (each with its default action)."""
    numbers = [getattr(signal, name) for name in STRAY_SIGNALS if hasattr(signal, name)]
    numbers += range(signal.SIGRTMIN, signal.SIGRTMAX + 1)
    for number in numbers:
        if signal.getsignal(number) == signal.SIG_DFL:
            signal.signal(number, _dropped)


def _dropped(number, frame) -> None:
    """A stray signal's handler: nothing to do (the signal watch's wake-up ignores its number)."""
