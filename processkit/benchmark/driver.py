"""The one place ``bench`` touches the engine: one measured run of an argv, in this process.

Everything engine-specific is here so the rest of ``processkit.benchmark`` sees only ``Measured``
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

``TreeMemory`` closes that gap where the host mounts the cgroup v1 memory controller: the
bench process moves once into a memory group of its own, so every run's tree is born inside it
(no per-run migration, which costs a run about 10 ms of waiting); before each run the group's
high-water mark is reset to its current usage, and the run's peak is the mark afterwards minus
that usage. The group is named after a run directory whose lock this process holds, so the
sweep removes it if the bench process dies.
"""

from __future__ import annotations

import os
import resource
import signal
import time

from ..containment import cgroup_v1, cgroupfs, prctl, sweep
from ..engine import runner
from ..errors import Kind
from ..plain import Plain
from ..rundir import RunDir
from ..spec import RunSpec

SETTLE_SECONDS = 0.05
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


def _usage(outcome: runner.Outcome, user_ns: int, system_ns: int, tree_peak: int | None) -> Usage | None:
    if outcome.usage is None:
        return None
    if isinstance(outcome.usage, tuple):  # the engine's summary and root rusage, wrapped here
        summary, rusage = outcome.usage
        peak, source = summary.peak_memory_bytes, "container"
        if tree_peak is not None:
            peak, source = tree_peak, "bench_memory_group"
        elif peak is None and rusage is not None:
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


class TreeMemory:
    """A v1 memory group this process and every run's tree live in for the benchmark."""

    def __init__(self) -> None:
        parent = cgroup_v1.own_groups().get("memory")
        if parent is None:
            raise OSError("no cgroup v1 memory hierarchy")
        self._rundir = RunDir()
        self.path = os.path.join(parent, sweep.group_name(self._rundir.token))
        self._home = os.path.join(parent, "cgroup.procs")
        try:
            procs = cgroupfs.make_group(self.path)
        except OSError:
            self._rundir.close()
            raise
        try:
            cgroupfs.join(procs)
        except OSError:
            cgroupfs.remove_group(self.path)  # never joined: nothing to leave
            self._rundir.close()
            raise
        finally:
            os.close(procs)

    @classmethod
    def open(cls) -> TreeMemory | None:
        """The group, or None where the host has no usable v1 memory controller."""
        try:
            return cls()
        except OSError:
            return None

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def reset(self) -> int:
        """Reset the high-water mark to the current usage; that usage (this process's share)."""
        cgroupfs.write_text(self._file("memory.max_usage_in_bytes"), "0")
        return int(cgroupfs.read_text(self._file("memory.usage_in_bytes")))

    def peak_since(self, baseline: int) -> int:
        return max(0, int(cgroupfs.read_text(self._file("memory.max_usage_in_bytes"))) - baseline)

    def close(self) -> None:
        """Move this process back where it was and remove the group; then the lock goes."""
        try:
            cgroupfs.write_text(self._home, str(os.getpid()))
        except OSError:
            pass  # the rmdir below then fails and the sweep removes the group later
        cgroupfs.remove_group(self.path)
        self._rundir.close()


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


def _children_cpu_ns() -> tuple[int, int]:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(used.ru_utime * 1e9), round(used.ru_stime * 1e9)


def _reset(memory: TreeMemory | None) -> int | None:
    if memory is None:
        return None
    try:
        return memory.reset()
    except (OSError, ValueError):
        return None  # this run falls back to the root's figure


def measure(
    argv: tuple[str, ...],
    *,
    timeout_ms: int | None = None,
    jsonl: str | None = None,
    echo: bool = False,
    memory: TreeMemory | None = None,
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
    baseline = _reset(memory)
    user_before, system_before = _children_cpu_ns()
    try:
        outcome = runner.execute(spec)
    finally:  # the engine leaves its absorbing handlers in place; between runs ours apply
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    _settle()
    user_after, system_after = _children_cpu_ns()
    user_ns, system_ns = user_after - user_before, system_after - system_before
    tree_peak = None
    if memory is not None and baseline is not None:
        try:
            tree_peak = memory.peak_since(baseline)
        except (OSError, ValueError):
            pass
    usage = _usage(outcome, user_ns, system_ns, tree_peak)
    # The engine's own record (the accounting layer) may carry nanosecond CPU; else the delta.
    engine_user, engine_system = getattr(usage, "user_ns", None), getattr(usage, "system_ns", None)
    if engine_user is not None and engine_system is not None:
        user_ns, system_ns = engine_user, engine_system
    peak = usage.peak_memory_bytes if usage is not None else None
    started, ended = outcome.started_ns, outcome.ended_ns
    failure = outcome.failure
    timed_out = failure is not None and failure.kind is Kind.TIMEOUT
    return Measured(
        wall_ns=ended - started if started is not None and ended is not None and not timed_out else None,
        user_ns=user_ns,
        system_ns=system_ns,
        peak_memory_bytes=peak if peak is not None else tree_peak,
        exit_code=None if failure is not None else outcome.code,
        timed_out=timed_out,
        cancelled=failure is not None and failure.kind is Kind.CANCELLED,
        error=failure.message if failure is not None else None,
        usage=usage,
    )
