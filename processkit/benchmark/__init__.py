"""Benchmarking: what ``processkit-cli bench`` runs (``processkit.bench`` calls that command).

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
) -> BenchResult:
    """Run the benchmark; with ``progress_fd`` (a terminal) draw a progress line per command;
    ``finished`` gets the result so far each time a command's runs are all done."""
    from .session import Session  # the engine, only when a benchmark really runs here

    if progress_fd is None:
        return Session(commands, options, finished=finished).run()
    from .progress import ProgressBars

    bars = ProgressBars(commands, progress_fd, options.runs or options.min_runs)
    bars.start()
    try:
        return Session(commands, options, bars, finished=finished).run()
    finally:
        bars.close()
