"""Benchmarking: what ``processkit-cli bench`` and ``processkit.bench`` run (the API's in a
process its runner service starts for it, ``service.bench``).

``plan`` says what to run, ``session`` runs it (through ``driver``, the one module that touches
the engine), ``stats`` and ``result`` turn the runs into figures, ``printout`` (the summary as text), ``progress`` and
``exports`` show them.
"""

from __future__ import annotations

from .plan import Command, Options, Order
from .result import BenchResult, CommandResult, TimedRun

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

__all__ = ["BenchResult", "Command", "CommandResult", "Options", "Order", "TimedRun", "bench_commands"]


def bench_commands(
    commands: list[Command],
    options: Options,
    progress_fd: int | None = None,
    finished: Callable[[BenchResult], None] | None = None,
    stop_fd: int | None = None,
    over: Callable[[BenchResult, int], None] | None = None,
    starts: Callable[[BenchResult, int], None] | None = None,
) -> BenchResult:
    """Run the benchmark; with ``progress_fd`` (a terminal) draw a progress line per command;
    ``finished`` gets the result so far each time a command's runs are all done; ``stop_fd``
    (the API's bench process: its caller's connection) stops it once a stop's source is written
    to it, or at its end of file (``engine.stopfd``); ``starts`` and ``over`` (a command run in a
    row: sequential order, or the only one) get each command's index as its steps begin and once
    it is over, with the results so far, the progress lines erased first and drawn again after.

    A stop signal ends it through each run's release (``session.Stopped``, whose ``source`` is
    ``ctrl_c`` for SIGINT): during a run the host's signal watch takes it; before the first run
    and after the last, SIGINT is Python's KeyboardInterrupt and SIGTERM and SIGHUP are made one
    here, so they too stop the benchmark rather than kill this process."""
    import signal

    from .session import Session, Stopped  # the engine, only when a benchmark really runs here

    stopped_by: list[int] = []

    def interrupt(signum, frame) -> None:
        stopped_by.append(signum)
        raise KeyboardInterrupt

    found = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGHUP)}
    for number, handler in found.items():
        if handler is not signal.SIG_IGN:
            signal.signal(number, interrupt)
    session = Session(commands, options, finished=finished, stop_fd=stop_fd, over=over, starts=starts)
    try:
        try:
            if progress_fd is None:
                return session.run()
            from .progress import ProgressBars

            bars = ProgressBars(commands, progress_fd, options.runs or options.min_runs)
            bars.start()
            session.progress, session.tick = bars, bars.tick
            session.over = None if over is None else bars.above(over)
            session.starts = None if starts is None else bars.above(starts, printed_for_good=False)
            try:
                return session.run()
            finally:
                bars.close()
        except KeyboardInterrupt:  # a stop signal between runs (before the first's watch, after the last)
            source = "signal" if stopped_by else "ctrl_c"  # SIGTERM, SIGHUP; else a Ctrl-C
            raise Stopped(session.stop_line(" by a signal"), source) from None
    finally:
        for number, handler in found.items():
            if signal.getsignal(number) is interrupt:
                signal.signal(number, handler)
