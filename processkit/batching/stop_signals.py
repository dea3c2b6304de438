"""A ``--dask-scheduler`` client's stop signals (``fleet``): while it waits for its tasks, the
first one raises ``Stopping`` (held while a task's lines are recorded), a second one leaves at once."""

from __future__ import annotations

import contextlib
import signal
import threading


class Stopping(Exception):
    """Raised by the client's stop-signal handler, out of its wait for the tasks."""


def catch_stop_signals(stop: list[str]):
    """Make a stop signal raise ``Stopping`` (its source appended to ``stop``) while the client
    waits; a second one raises KeyboardInterrupt, leaving at once. Returns what restores the
    handlers, and ``held``: a context inside which the first signal is only noted, and raised
    as it ends (a task's lines being recorded). Only the main thread can take signals: elsewhere
    nothing changes."""
    from ..engine.signals import STOP_SIGNALS
    from ..writeall import doubt_own

    if threading.current_thread() is not threading.main_thread():
        return (lambda: None), contextlib.nullcontext
    holding, pending = [False], [False]

    def on_signal(number, frame) -> None:
        if stop:
            raise KeyboardInterrupt
        doubt_own()  # a line of the batch's held in a write for a reader that takes nothing waits no more
        stop.append(STOP_SIGNALS[number])
        if holding[0]:
            pending[0] = True
        else:
            raise Stopping

    @contextlib.contextmanager
    def held():
        holding[0] = True
        try:
            yield
        finally:
            holding[0] = False
        if pending[0]:
            pending[0] = False
            raise Stopping

    previous = {number: signal.signal(number, on_signal) for number in STOP_SIGNALS}

    def restore() -> None:
        for number, handler in previous.items():
            signal.signal(number, handler)

    return restore, held
