"""The one place ``bench`` touches the engine: one measured run of an argv, in this process.

Everything engine-specific is here so the rest of ``processkit.benchmark`` sees only
``Measured`` values: the RunSpec a benchmark run gets, how it is executed
(``engine.runner.execute``, in the long-lived bench process, so no runner is started per run),
and how the outcome's timestamps and usage become figures. The timed interval is the outcome's
``started_ns`` (spawn returned, i.e. the child had exec'd) to ``ended_ns`` (the root reaped):
the container, the publication and the JSONL set-up happen before it, teardown after it.

Figures: the engine's ``Usage`` (``containment.accounting``: the run's cgroups, read again once
the tree is gone) gives peak memory and user/system CPU for the whole tree. Where it has no
CPU figure, the bench process's ``RUSAGE_CHILDREN`` difference across the run stands in: as the
subreaper of every run's tree (``adopt_orphans``) it reaps every member, orphans and the ones
killed at teardown too, so the difference is the whole tree's.
"""

from __future__ import annotations

import os
import resource
import signal
import time

from .. import safepath
from ..containment import Usage, prctl
from ..engine import runner
from ..engine.host import Host
from ..errors import Failure, Kind
from ..plain import Plain
from ..spec import RunSpec, StdinMode
from ..text import sanitize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

SETTLE_SECONDS = 0.05
TICK_SECONDS = 0.25  # how often a run's progress line is redrawn while it runs
WATCHED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD)  # what a run's SignalWatch takes


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
        self.usage = usage  # the engine's record, None where the run never spawned


def adopt_orphans() -> None:
    """Make this process the subreaper of every run's tree, so members orphaned during a run are
    reaped here and their CPU is in ``RUSAGE_CHILDREN`` (under cgroup v2 they would go to init)."""
    prctl.set_child_subreaper()


def _settle() -> None:
    """Reap what teardown killed but the kernel had not yet turned into a zombie when the run
    ended (a member leaves its cgroup before it can be reaped): its CPU belongs to this run, not
    to the next one's figures. Bounded: a process that outlived the run (a process-group
    escapee) is left after SETTLE_SECONDS."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no child left at all
        if pid == 0:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.0005)


def _every(host: Host, tick: Callable[[], None]) -> None:
    def again() -> None:
        tick()
        host.loop.call_later(TICK_SECONDS, again)

    host.loop.call_later(TICK_SECONDS, again)


def _output_fd(output: str) -> int | None:
    """``--output null`` or ``--output FILE`` (emptied for each run, as hyperfine does)."""
    if output == "null":
        return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        return safepath.open_for_writing(output)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot write --output {sanitize(output)}: {exc.strerror or exc}") from None


def _children_cpu_ns() -> tuple[int, int]:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(used.ru_utime * 1e9), round(used.ru_stime * 1e9)


def measure(
    argv: tuple[str, ...],
    *,
    timeout_ms: int | None = None,
    jsonl: str | None = None,
    echo: bool = False,
    output: str = "pipe",
    input_file: str | None = None,
    tick: Callable[[], None] | None = None,
) -> Measured:
    """Run ``argv`` once, contained, and measure it; never raises for what the run reports.
    ``output``: pipe (read, discarded or echoed), inherit, null or a file's path (hyperfine's
    ``--output``); ``tick`` is called on the run's loop every TICK_SECONDS while it runs."""
    output_fd = None if output in ("pipe", "inherit") else _output_fd(output)
    spec = RunSpec(
        argv=argv,
        jsonl=jsonl if jsonl is not None else os.devnull,
        run_id=f"bench-{os.getpid()}-{time.time_ns()}",
        run_id_given=False,
        timeout_ms=timeout_ms,
        grace_ms=0,
        echo=echo,
        output_fd=output_fd,
        stdin=StdinMode.FILE if input_file is not None else StdinMode.NULL,
        stdin_file=input_file,
    )
    handlers = {signum: signal.getsignal(signum) for signum in WATCHED}
    user_before, system_before = _children_cpu_ns()
    host = Host()
    if tick is not None:
        _every(host, tick)
    try:
        outcome = host.carry(runner.steps(host, spec))
        assert isinstance(outcome, runner.Outcome)
    finally:  # the engine leaves its absorbing handlers in place; between runs ours apply
        host.close()
        if output_fd is not None:
            os.close(output_fd)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    _settle()
    user_after, system_after = _children_cpu_ns()
    user_ns, system_ns = user_after - user_before, system_after - system_before
    usage = outcome.usage
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
