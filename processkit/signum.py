"""Signal numbers and dispositions for the runner, without the ``signal`` module's enums.

Facts about start-up that shape this module: ``import signal`` builds three enum classes
(``Signals``, ``Handlers``, ``Sigmasks``) over the C module ``_signal``, which imports ``enum``
and costs a plain run a few percent of its start-up; ``_signal`` itself is already loaded by
the interpreter before any script runs. The runner needs only numbers, dispositions and the
wakeup fd, all of which ``_signal`` gives as plain ints with the same behaviour (``signal``'s
functions only convert their results to those enums). So they are taken from ``_signal``,
with ``signal`` as the fallback where an interpreter has no such module. Code off the run
path that wants signal names (reports, the fallback spawn) imports ``signal`` itself.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # the public module's annotations: the same functions
    import signal as _source
else:
    try:
        import _signal as _source
    except ImportError:  # an interpreter without CPython's _signal
        import signal as _source

SIG_DFL = _source.SIG_DFL
SIG_IGN = _source.SIG_IGN
default_int_handler = _source.default_int_handler  # Python's own SIGINT handler: KeyboardInterrupt
SIGCHLD = _source.SIGCHLD
SIGCONT = _source.SIGCONT
SIGHUP = _source.SIGHUP
SIGINT = _source.SIGINT
SIGKILL = _source.SIGKILL
SIGSTOP = _source.SIGSTOP
SIGTERM = _source.SIGTERM
SIGTSTP = _source.SIGTSTP
SIGTTIN = _source.SIGTTIN
SIGTTOU = _source.SIGTTOU
SIGWINCH = _source.SIGWINCH
getsignal = _source.getsignal
raise_signal = _source.raise_signal
pthread_sigmask = _source.pthread_sigmask
SIG_BLOCK = _source.SIG_BLOCK
SIG_SETMASK = _source.SIG_SETMASK
SIG_UNBLOCK = _source.SIG_UNBLOCK
set_wakeup_fd = _source.set_wakeup_fd
signal = _source.signal
pidfd_send_signal = _source.pidfd_send_signal


def named(names: tuple[str, ...]) -> list[int]:
    """The numbers of the signals ``names`` this platform has."""
    return [getattr(_source, name) for name in names if hasattr(_source, name)]


def numbers(names: tuple[str, ...]) -> list[int]:
    """The numbers of the signals ``names`` this platform has, and of every real-time one."""
    return named(names) + list(range(_source.SIGRTMIN, _source.SIGRTMAX + 1))


# The ``cancelled.source`` of a run whose caller is gone (``engine.signals``: SIGHUP's word), here
# for the code that stops a run without the engine (``api.dask_task``).
CALLER_GONE_SOURCE = "sighup"
