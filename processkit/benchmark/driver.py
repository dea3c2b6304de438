"""The one place ``bench`` touches the engine: one measured run of an argv, in this process.

Everything engine-specific is here so the rest of ``processkit.bench`` sees only ``Measured``
values: the RunSpec a benchmark run gets, how it is executed (``engine.runner.execute``, in the
long-lived bench process, so no runner is started per run), and how the outcome's timestamps
and usage become figures. The timed interval is the outcome's ``started_ns`` (spawn returned,
i.e. the child had exec'd) to ``ended_ns`` (the root reaped): the container, the publication
and the JSONL set-up happen before it, teardown after it.

Usage: until the engine carries a whole-tree ``Usage`` record, the outcome holds the
container's ``ResourceSummary`` and the root's ``wait4`` rusage. User and system CPU are the
bench process's ``RUSAGE_CHILDREN`` delta across the run: as subreaper it reaps every member
(orphans and the ones killed at teardown too), so the delta is the whole tree's. Peak memory is
the container's counter where the host has one, else the root's ``ru_maxrss`` (the largest
single process of the tree, not a sum: ``sources`` says which).
"""

from __future__ import annotations

import os
import resource
import signal
import time

from ..engine import runner
from ..errors import Kind
from ..plain import Plain
from ..spec import RunSpec

WATCHED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD)  # what a run's SignalWatch takes


class Usage(Plain):
    """The whole tree's figures for one run; None where nothing measured them."""

    __slots__ = (
        "peak_memory_bytes",
        "total_cpu_ms",
        "user_cpu_ms",
        "system_cpu_ms",
        "peak_process_count",
        "io_read_bytes",
        "io_write_bytes",
        "oom_kills",
        "sources",
        "user_ns",
        "system_ns",
    )

    def __init__(
        self,
        *,
        peak_memory_bytes: int | None = None,
        total_cpu_ms: int | None = None,
        user_cpu_ms: int | None = None,
        system_cpu_ms: int | None = None,
        peak_process_count: int | None = None,
        io_read_bytes: int | None = None,
        io_write_bytes: int | None = None,
        oom_kills: int | None = None,
        sources: dict[str, str] | None = None,
        user_ns: int | None = None,
        system_ns: int | None = None,
    ):
        self.peak_memory_bytes = peak_memory_bytes
        self.total_cpu_ms = total_cpu_ms
        self.user_cpu_ms = user_cpu_ms
        self.system_cpu_ms = system_cpu_ms
        self.peak_process_count = peak_process_count
        self.io_read_bytes = io_read_bytes
        self.io_write_bytes = io_write_bytes
        self.oom_kills = oom_kills
        self.sources = sources  # figure -> what measured it
        self.user_ns = user_ns
        self.system_ns = system_ns


class Measured(Plain):
    """One run as the statistics see it: wall nanoseconds (exec to reap), CPU, memory, status."""

    __slots__ = (
        "wall_ns",
        "user_ns",
        "system_ns",
        "peak_memory_bytes",
        "exit_code",
        "timed_out",
        "cancelled",
        "error",
        "usage",
    )

    def __init__(
        self,
        wall_ns: int | None,
        user_ns: int,
        system_ns: int,
        peak_memory_bytes: int | None,
        exit_code: int | None,
        timed_out: bool,
        cancelled: bool,
        error: str | None,
        usage: Usage | None,
    ):
        self.wall_ns = wall_ns
        self.user_ns = user_ns
        self.system_ns = system_ns
        self.peak_memory_bytes = peak_memory_bytes
        self.exit_code = exit_code  # the child's (128+N for signal N); None when it never ran to an exit
        self.timed_out = timed_out
        self.cancelled = cancelled  # a stop signal (Ctrl-C) ended the run: the benchmark stops
        self.error = error  # the runner's own failure (not started, timed out, ...), in words
        self.usage = usage


def _usage(outcome: runner.Outcome, user_ns: int, system_ns: int) -> Usage | None:
    if outcome.usage is None:
        return None
    if isinstance(outcome.usage, tuple):  # the engine's summary and root rusage, wrapped here
        summary, rusage = outcome.usage
        peak, source = summary.peak_memory_bytes, "container"
        if peak is None and rusage is not None:
            peak, source = rusage.ru_maxrss * 1024, "root_maxrss"
        return Usage(
            peak_memory_bytes=peak,
            total_cpu_ms=summary.total_cpu_ms,
            user_cpu_ms=user_ns // 1_000_000,
            system_cpu_ms=system_ns // 1_000_000,
            peak_process_count=summary.peak_process_count,
            io_read_bytes=summary.io_read_bytes,
            io_write_bytes=summary.io_write_bytes,
            sources={"memory": source, "cpu": "rusage_children"},
            user_ns=user_ns,
            system_ns=system_ns,
        )
    return outcome.usage  # type: ignore[return-value]  # the engine's own Usage record


def _children_cpu_ns() -> tuple[int, int]:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(used.ru_utime * 1e9), round(used.ru_stime * 1e9)


def measure(
    argv: tuple[str, ...], *, timeout_ms: int | None = None, jsonl: str | None = None, echo: bool = False
) -> Measured:
    """Run ``argv`` once, contained, and measure it; never raises for what the run reports."""
    spec = RunSpec(
        argv=argv,
        jsonl=jsonl if jsonl is not None else os.devnull,
        run_id=f"bench-{os.getpid()}-{time.time_ns()}",
        run_id_given=False,
        timeout_ms=timeout_ms,
        grace_ms=0,
        echo=echo,
    )
    handlers = {signum: signal.getsignal(signum) for signum in WATCHED}
    user_before, system_before = _children_cpu_ns()
    try:
        outcome = runner.execute(spec)
    finally:  # the engine leaves its absorbing handlers in place; between runs ours apply
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    user_after, system_after = _children_cpu_ns()
    user_ns, system_ns = user_after - user_before, system_after - system_before
    usage = _usage(outcome, user_ns, system_ns)
    if usage is not None and usage.user_ns is not None and usage.system_ns is not None:
        user_ns, system_ns = usage.user_ns, usage.system_ns
    started, ended = outcome.started_ns, outcome.ended_ns
    failure = outcome.failure
    timed_out = failure is not None and failure.kind is Kind.TIMEOUT
    return Measured(
        wall_ns=ended - started if started is not None and ended is not None and not timed_out else None,
        user_ns=user_ns,
        system_ns=system_ns,
        peak_memory_bytes=usage.peak_memory_bytes if usage is not None else None,
        exit_code=None if failure is not None else outcome.code,
        timed_out=timed_out,
        cancelled=failure is not None and failure.kind is Kind.CANCELLED,
        error=failure.message if failure is not None else None,
        usage=usage,
    )
