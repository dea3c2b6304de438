"""One run as a benchmark's statistics see it (``Measured``), and how the engine's ``Outcome`` of
a run becomes one (``measured_from``): the figures ``driver`` hands the session, and a test's
executor makes."""

from __future__ import annotations

from ..errors import Kind
from ..plain import Plain
from ..text import killed_by

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..containment import Usage
    from ..engine.endings import Outcome


class Measured(Plain):
    """One run as the statistics see it: wall nanoseconds (spawn to reap), CPU (the root's
    rusage from its reaping, ``user_ns``/``system_ns``, hyperfine's, and the whole tree's,
    ``tree_cpu_ns``: its group's user+system), memory (the group's peak, ``peak_memory_bytes``, and
    the root's ``max_rss_bytes``), status."""

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
        "leftovers",
        "stop_source",
        "max_rss_bytes",
        "counters",
        "signal",
        "tree_cpu_ns",
        "off_cpu_ns",
    )

    def __init__(
        self,
        wall_ns: int | None,
        user_ns: int | None,
        system_ns: int | None,
        peak_memory_bytes: int | None,
        exit_code: int | None,
        timed_out: bool = False,
        cancelled: bool = False,
        error: str | None = None,
        usage: Usage | None = None,
        tree_cpu_ns: int | None = None,
    ):
        self.wall_ns = wall_ns
        self.user_ns = user_ns  # the root's, as wait4 gave them: hyperfine's user and system
        self.system_ns = system_ns
        # the whole tree's user+system (its counters), None where none measured it; not ``Usage.cpu_ns``,
        # which may come from another counter (v1 ``cpuacct.usage`` beside v2's split) or round apart
        self.tree_cpu_ns = tree_cpu_ns
        self.peak_memory_bytes = peak_memory_bytes
        self.exit_code = exit_code  # the child's (128+N for signal N); None when it never ran to an exit
        self.timed_out = timed_out
        self.cancelled = cancelled  # a stop signal (Ctrl-C) ended the run: the benchmark stops
        self.error = error  # the runner's own failure (not started, timed out, ...), in words
        self.usage = usage  # the engine's record, None where the run never spawned
        self.leftovers = 0  # processes the run left outside its boundary, ended after it
        self.stop_source: str | None = None  # with ``cancelled``: the stop signal's name (``ctrl_c``, ``sigterm``)
        self.max_rss_bytes: int | None = None  # the root's ru_maxrss from wait4 (hyperfine's memory_usage_byte)
        self.counters: dict[str, int | None] | None = None  # the tree's perf counters (``counters``), per name
        self.signal: int | None = None  # the signal the root died of (its exit_code 128+N), None where it exited
        self.off_cpu_ns: int | None = None  # the tree's time neither on a CPU nor waiting for one (``off_cpu``)

    def ended(self) -> str:
        """How the run ended: ``exited with 3``, or ``was killed by signal 9 (SIGKILL), exit code
        137`` (hyperfine's ``exit_codes`` entry, 128+N, which ``--ignore-failure=137`` names)."""
        if self.signal is None:
            return f"exited with {self.exit_code}"
        return f"was {killed_by(self.signal)}, exit code {self.exit_code}"


def cpu_sum(user, system):
    """User plus system, None where either was not measured (never half a figure, which a gate
    would compare): the tree's CPU of a run, or of an export's run before ``cpu_times``."""
    return None if user is None or system is None else user + system


def tree_cpu(cpu_times: list | None, users: list, systems: list) -> list:
    """An export's tree CPU of each run: its ``cpu_times``, or, in one before processkit-bench/3
    (which has none), its user+system, which were the tree's then (a run's null where either is)."""
    return list(map(cpu_sum, users, systems)) if cpu_times is None else cpu_times


def off_cpu(outcome: Outcome, tree_cpu_ns: int | None) -> int | None:
    """A run's off-CPU nanoseconds: from its spawn to its root's exit, less its tree's CPU time
    and its wait for a CPU, what others' CPU load cannot lengthen (a sleep, I/O, a lock); at
    least 0; None where a figure is missing. From the spawn, not from the child's first step (the
    timed interval): its group's wait counts the child's first wait for a CPU, from its clone
    into the group, which is long on a busy host. The shell's start-up is not taken off: both
    sides of a comparison hold it alike. Only where the kernel timed the exit (``exit_timed``):
    the loop's reap comes after ``bench``'s own wait for a CPU, which no wait of the group holds,
    so beside load it read 7-19 ms a run of ``true`` that never slept (0.1 ms by the kernel's)."""
    figures = (outcome.started_ns, outcome.ended_ns, tree_cpu_ns, outcome.cpu_wait_ns)
    if None in figures or outcome.failure is not None or not outcome.exit_timed:
        return None
    started, ended, cpu, wait = figures
    return max(ended - started - cpu - wait, 0)  # type: ignore[operator] # none is None (above)


def measured_from(outcome: Outcome) -> Measured:
    """The figures of the engine's ``Outcome`` of one run."""
    usage = outcome.usage
    # None where no counter measured it (a read error; a process-group run whose counter took in
    # a child of no group of its, ``ChildrenUsage``): unmeasured, never 0, which a gate would compare
    tree = cpu_sum(usage.user_ns, usage.system_ns) if usage is not None else None
    user_ns, system_ns = outcome.root_cpu_ns or (None, None)  # None: the root was never reaped
    started, ended = outcome.command_from_ns or outcome.started_ns, outcome.ended_ns
    failure = outcome.failure
    timed_out = failure is not None and failure.kind is Kind.TIMEOUT
    measured = Measured(
        wall_ns=ended - started if started is not None and ended is not None and not timed_out else None,
        user_ns=user_ns,
        system_ns=system_ns,
        peak_memory_bytes=usage.peak_memory_bytes if usage is not None else None,
        exit_code=None if failure is not None else outcome.code,
        timed_out=timed_out,
        cancelled=failure is not None and failure.kind is Kind.CANCELLED,
        error=failure.message if failure is not None else None,
        usage=usage,
        tree_cpu_ns=tree,
    )
    measured.max_rss_bytes = outcome.max_rss_bytes
    measured.signal = outcome.signal
    measured.off_cpu_ns = off_cpu(outcome, tree)
    return measured
