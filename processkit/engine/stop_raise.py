"""A wait before the host watches the signals, ended by a stop signal as a stop (``stops_raise``,
``Stopped``): a batch's FIFO writer or slow manifest pipe, whose waits come before its host.
Apart from ``engine/signals.py``, which every run loads, because a plain run has no such wait."""

from __future__ import annotations

from .. import signum as signals
from .signals import STOP_SIGNALS, stop_came


class Stopped(Exception):
    """A stop signal came during a wait before any watch (``stops_raise``): the wait ends as a
    stop does, not by the signal's default (killed, or Python's silent KeyboardInterrupt)."""

    def __init__(self, source: str, awaited: str = "its input awaited"):
        super().__init__(source)
        self.source = source  # ``STOP_SIGNALS``' word: ``ctrl_c``, ``sigterm``, ``sighup``
        self.awaited = awaited  # what the wait was for, as the closing line says it

    def sentence(self) -> str:
        """Its words, as the CLI's closing line and the API's batch failure say them (107)."""
        from .endings import stop_named

        return f"no job started, cancelled by {stop_named(self.source)} ({self.awaited})"


class stops_raise:  # noqa: N801 - used as a ``with`` form, as a contextmanager would be
    """The stop signals (one ignored stays ignored) raise ``Stopped`` inside the ``with``, their
    handlers put back after: any wait on an input before the host watches the signals (a batch's
    FIFO writer or slow manifest pipe, a run's ``--env-file`` FIFO). A class, not
    ``contextlib``: a plain run's start-up imports nothing it does not need."""

    def __enter__(self) -> None:
        self._found = {number: signals.getsignal(number) for number in STOP_SIGNALS}
        try:
            _swapped(
                {number: _raise_stopped for number, handler in self._found.items() if handler is not signals.SIG_IGN}
            )
        except BaseException:  # a stop that came before: raised with every handler back as it was
            self.__exit__()
            raise

    def __exit__(self, *exc) -> None:
        _swapped({number: handler for number, handler in self._found.items() if handler is not signals.SIG_IGN})


def _raise_stopped(number, frame) -> None:
    raise Stopped(stop_came(number))


def _swapped(handlers: dict) -> None:
    """Each of ``handlers`` installed with the stop signals blocked, so none comes between two
    swaps (one found its handler half swapped: still raising ``Stopped`` from the ``with``'s end,
    the swaps after it never made): one sent meanwhile reaches the handler it finds once all are
    in. A handler raising for a signal that came before (``signal`` runs the pending ones
    first, and swaps nothing then) is raised once every swap is made."""
    raised: BaseException | None = None
    mask = signals.pthread_sigmask(signals.SIG_BLOCK, STOP_SIGNALS)
    try:
        for number, handler in handlers.items():
            while True:  # blocked: each signal caught before can raise once, no more come
                try:
                    signals.signal(number, handler)
                    break
                except (Stopped, KeyboardInterrupt) as exc:
                    raised = raised or exc
    finally:
        signals.pthread_sigmask(signals.SIG_SETMASK, mask)
    if raised is not None:
        raise raised


def before_watch(make, awaited: str, hold: bool = True):
    """``make()`` (a batch's set-up before its own handlers watch the signals: ``--out`` readied, a
    ``--resume`` summary read, a Dask client connected), a stop signal meanwhile raising
    ``Stopped(source, awaited)``. ``hold``: then the stop signals not blocked yet are blocked
    (returned, for ``let_through``), so one that comes before the host's handlers are in reaches
    them; only those, as the host blocks others of its own (``guard_faults``). Not for a Dask
    client, whose loop thread a mask here does not hold back: its handlers come first instead.
    Either gap once killed the batch by the signal's default, with no word."""
    try:
        with stops_raise():
            made = make()
            if not hold:
                return made, set()
            added = set(STOP_SIGNALS) - signals.pthread_sigmask(signals.SIG_BLOCK, ())
            try:
                signals.pthread_sigmask(signals.SIG_BLOCK, added)
            except Stopped:  # one that came just before, run as the mask changed: none left blocked
                signals.pthread_sigmask(signals.SIG_UNBLOCK, added)
                raise
            return made, added
    except Stopped as stop:
        raise Stopped(stop.source, awaited) from None


def let_through(added) -> None:
    """The stop signals ``before_watch`` blocked unblocked, ``added`` emptied: a second call (a
    failure's cleanup) unblocks nothing the host may have blocked since."""
    if added:
        signals.pthread_sigmask(signals.SIG_UNBLOCK, added)
        added.clear()
