"""Benchmarking: ``processkit-cli bench`` and ``processkit.bench``.

``plan`` says what to run, ``session`` runs it (through ``driver``, the one module that touches
the engine), ``stats`` and ``result`` turn the runs into figures, ``summary``, ``progress`` and
``exports`` show them.
"""

from __future__ import annotations

from .plan import Command, Options, Order, expand
from .result import BenchResult, CommandResult, TimedRun
from .session import Session

__all__ = ["BenchResult", "Command", "CommandResult", "Options", "Order", "TimedRun", "bench", "bench_commands"]


def bench_commands(commands: list[Command], options: Options, progress_fd: int | None = None) -> BenchResult:
    """Run the benchmark; with ``progress_fd`` (a terminal) draw a progress line per command."""
    if progress_fd is None:
        return Session(commands, options).run()
    from .progress import ProgressBars

    bars = ProgressBars(commands, progress_fd)
    try:
        return Session(commands, options, bars.update).run()
    finally:
        bars.close()


def bench(
    commands: list,
    *,
    names: list[str] | None = None,
    parameters: dict[str, list] | None = None,
    order: str = "interleaved",
    **options,
) -> BenchResult:
    """Benchmark ``commands`` in this process: each an argv (list of str, run shell-free) or a
    string (run through ``sh -c``). Keywords are ``Options``' (``runs``, ``warmup``,
    ``min_time_s``, ``timeout_ms``, ``cpus``, ...) and ``order`` is ``interleaved`` or
    ``sequential``. Raises ``processkit.errors.Failure`` as the CLI would exit with it."""
    from ..errors import usage
    from .plan import ORDERS

    if order not in ORDERS:
        raise usage(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    given = [("shell", c) if isinstance(c, str) else ("argv", tuple(str(a) for a in c)) for c in commands]
    for key in ("prepare", "setup", "cleanup"):
        if options.get(key) is not None:
            options[key] = tuple(options[key])
    if options.get("cpus") is not None:
        options["cpus"] = tuple(options["cpus"])
    scan = [(name, [str(v) for v in values]) for name, values in (parameters or {}).items()]
    return bench_commands(expand(given, list(names or ()), scan), Options(order=ORDERS[order], **options))
