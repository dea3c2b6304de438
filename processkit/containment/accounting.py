"""Per-run accounting: the whole tree's figures, each from the kernel counter that holds it, and
the stream's ``resource_summary``, which keeps the reference's figures instead (``stream_summary``).

A run's figures come from the first mechanism that counts each one, in this order: the cgroup
v1 groups made for the run (caps or accounting only: ``cgroup_v1``), the run's own cgroup v2
group (``cpu.stat`` always; ``memory.peak``, ``pids.peak``, ``io.stat`` where the controllers
are on), and for a process group the runner's reaped children (``getrusage(RUSAGE_CHILDREN)``:
the runner is their subreaper, and a reaped process carries the figures of everything it reaped)
plus the members still alive at the read point. ``None`` means no counter here holds the figure,
never zero. Which counter gave each figure is in ``Usage.sources``.

Accounting is on by default; ``PROCESSKIT_ACCOUNTING=0`` turns the accounting-only groups off
(the comparison the benchmark makes). v1 groups are joined by writing to ``tasks`` rather than
``cgroup.procs``: the child is single-threaded between fork and exec, so moving its one thread
moves the process, and a thread moving itself skips the global threadgroup lock whose RCU grace
period made a ``cgroup.procs`` join wait (kernels with the single-thread migration change, from
2019; an older kernel takes that lock either way, so it pays no more than a ``cgroup.procs`` join).
"""

from __future__ import annotations

import _thread
import os

from .. import envvars
from ..plain import Plain
from ..rusage import children

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .members import LiveUsage, Member

# The figures the v1 ``resource_summary`` carries; the rest of Usage's are extensions.
RESOURCE_SUMMARY_FIELDS = ("peak_memory_bytes", "total_cpu_ms", "io_read_bytes", "io_write_bytes", "peak_process_count")
# A CPU figure in ns gives its ms figure: (ns field, ms field).
CPU_PAIRS = (("cpu_ns", "total_cpu_ms"), ("user_ns", "user_cpu_ms"), ("system_ns", "system_cpu_ms"))
_MS_FIELD = dict(CPU_PAIRS)


def enabled() -> bool:
    """Whether runs get accounting-only groups (on unless ``PROCESSKIT_ACCOUNTING=0``)."""
    return envvars.get("PROCESSKIT_ACCOUNTING") != "0"


class Usage(Plain):
    """One run's figures for its whole tree; None where nothing here counts one. ``cpu_ns``,
    ``user_ns`` and ``system_ns`` keep the counter's own precision (ns for ``cpuacct``, us for
    ``cpu.stat``, us for rusage); ``sources`` maps each figure given to the counter it came from;
    ``read_error`` says a counter that exists could not be read (every figure is then None)."""

    __slots__ = (
        "peak_memory_bytes",
        "total_cpu_ms",
        "user_cpu_ms",
        "system_cpu_ms",
        "peak_process_count",
        "io_read_bytes",
        "io_write_bytes",
        "oom_kills",
        "cpu_ns",
        "user_ns",
        "system_ns",
        "sources",
        "read_error",
    )

    def __init__(
        self,
        peak_memory_bytes: int | None = None,
        total_cpu_ms: int | None = None,
        user_cpu_ms: int | None = None,
        system_cpu_ms: int | None = None,
        peak_process_count: int | None = None,
        io_read_bytes: int | None = None,
        io_write_bytes: int | None = None,
        oom_kills: int | None = None,
        cpu_ns: int | None = None,
        user_ns: int | None = None,
        system_ns: int | None = None,
        sources: dict[str, str] | None = None,
        read_error: bool = False,
    ):
        self.peak_memory_bytes = peak_memory_bytes
        self.total_cpu_ms = total_cpu_ms
        self.user_cpu_ms = user_cpu_ms
        self.system_cpu_ms = system_cpu_ms
        self.peak_process_count = peak_process_count
        self.io_read_bytes = io_read_bytes
        self.io_write_bytes = io_write_bytes
        self.oom_kills = oom_kills
        self.cpu_ns = cpu_ns
        self.user_ns = user_ns
        self.system_ns = system_ns
        self.sources = sources if sources is not None else {}
        self.read_error = read_error

    def resource_summary(self) -> dict:
        """The v1 ``resource_summary`` fields, exactly (the reference allows no other), with the
        whole tree's figures: the stream's own are ``stream_summary``'s."""
        return {"read_error": self.read_error, **{name: getattr(self, name) for name in RESOURCE_SUMMARY_FIELDS}}

    def extensions(self) -> dict:
        """What the same counters say beyond the ``resource_summary`` event: for the API, ``inspect`` and the report."""
        extended = {name: getattr(self, name) for name in FIELDS if name not in RESOURCE_SUMMARY_FIELDS}
        extended["sources"] = dict(self.sources)
        return extended

    def as_json(self) -> dict:
        return {**self.resource_summary(), **self.extensions()}

    @classmethod
    def from_json(cls, record: dict) -> Usage:
        """Lenient, as event parsing is: unknown keys are ignored, a missing figure is None."""
        figures = {name: record.get(name) for name in FIELDS}
        sources = record.get("sources")
        return cls(
            **figures,
            sources=dict(sources) if isinstance(sources, dict) else {},
            read_error=bool(record.get("read_error")),
        )


FIELDS = tuple(name for name in Usage.__slots__ if name not in ("sources", "read_error"))  # every figure
# The counters of the run's own group the reference reports: its cgroup v2 group's io.stat, and
# pids.peak where the pids controller caps the run (a v1 pids group of a capped run here).
_IO_SOURCES = ("io.stat rbytes (v2)", "io.stat wbytes (v2)")
_PIDS_SOURCES = ("pids.peak (v2)", "pids.peak (v1)")


def stream_summary(usage: Usage, live: LiveUsage | None, accounts: bool, pids_capped: bool) -> dict:
    """The stream's ``resource_summary``: the reference's figures at its read point (the ending
    decided, the teardown not begun), not the whole tree's ``usage`` (``run --usage-file``, the
    API, ``inspect``, a batch's lines). Memory and CPU are summed over the members live then
    (``live``, read from the tree the teardown starts from), each apart, the CPU their own (utime
    and stime, not their reaped children's): null once none is, as after a natural exit, and
    null where that read failed (``read_error`` stays for the counters' read: a null is a
    figure not accounted for, and the IO and process counters, read whole, are kept). The IO figures come only from the run's own cgroup v2
    ``io.stat``, the peak process count only from a ``pids.peak`` of a run capped by
    ``--max-processes`` (``pids_capped``), the only one whose pids controller the reference turns
    on. A mechanism the reference keeps no accounting for (``accounts`` false: the process
    group) reports every figure null, ``read_error`` false."""
    figures: dict = dict.fromkeys(RESOURCE_SUMMARY_FIELDS)
    if not accounts:
        return {"read_error": False, **figures}
    if usage.read_error:
        return {"read_error": True, **figures}
    if live is not None:  # else the members were not all read: no sum (a part's is smaller), the counters kept
        figures["peak_memory_bytes"] = live.peak_memory_bytes  # a live member's address space: a zombie has none
        if live.own_cpu_ns is not None:  # some member's stat was read: its own CPU, not its reaped children's
            figures["total_cpu_ms"] = live.own_cpu_ns // 1_000_000
    for field in ("io_read_bytes", "io_write_bytes"):
        if usage.sources.get(field) in _IO_SOURCES:
            figures[field] = getattr(usage, field)
    if pids_capped and usage.sources.get("peak_process_count") in _PIDS_SOURCES:
        figures["peak_process_count"] = usage.peak_process_count
    return {"read_error": False, **figures}


class Tally:
    """Figures gathered from several counters: each counter offers what it read, and the first
    figure offered for a field stays. (``give``, elsewhere, is only ever the return of what a
    ``take`` lent: ``pool.Pool``, ``batching.held.Spares``.)"""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}
        self.sources: dict[str, str] = {}

    def offer(self, field: str, value: int | None, source: str) -> None:
        if value is not None and field not in self.values:
            self.values[field] = value
            self.sources[field] = source

    def offer_ns(self, field: str, value: int | None, source: str) -> None:
        """A CPU figure in ns: also its ms figure, truncated (a measured value can be 0)."""
        ms_field = _MS_FIELD[field]
        if value is not None and field not in self.values and ms_field not in self.values:
            self.offer(field, value, source)
            self.offer(ms_field, value // 1_000_000, source)

    def missing(self, field: str) -> bool:
        return field not in self.values

    def usage(self) -> Usage:
        return Usage(**self.values, sources=self.sources)  # type: ignore[arg-type]  # its keys name the int fields


def write_file(path: str, usage: Usage, kept: dict[tuple[int, int], str] | None = None) -> None:
    """``run --usage-file``: the whole usage as one JSON object, replacing the file (never one
    of ``kept``'s, ``useroutputs.write_output``)."""
    from ..jsontext import dumps
    from ..useroutputs import write_output

    write_output(path, (dumps(usage.as_json()) + "\n").encode("utf-8"), kept)


class ChildrenUsage:
    """A process-group run's CPU and storage I/O: what the runner's reaped children used since
    this object was made (``RUSAGE_CHILDREN``; the runner is the subreaper of the whole tree,
    and a reaped process carries the figures of everything it reaped), plus what the members
    still alive at the read point used. Not a peak memory: ``ru_maxrss`` is the largest one
    process reached, not the tree's. Processes reaped by nobody (a parent that ignores
    ``SIGCHLD``) are missed. The counter is the whole process's: it takes in every child this
    process collects, whoever's it was (another run's tree, a batch or benchmark process the
    runner service started, an orphan of a run already over that the subreaper adopted). So a
    run offers nothing (null: not accounted for) once this process collected, while it was
    open, a child that was not of its own process group (``reaped``): a run alone, with nothing
    else collected, keeps its figures; a run that overlapped another run of this process
    shares its counter from the start. ``close`` ends the run's share of it. A process whose
    other code collects children this one never sees (a host inside another program, a Dask
    worker's: ``unseen``) shares it for every run open while such a host lives.

    A process that carries one run in its whole life (the CLI's ``run``, ``sole``) knows more:
    every child it collects is that run's or one it inherited before the run (``inherited``),
    so an orphan outside the run's group (a member's ``setsid`` daemon) is the run's own
    figure, unless it is (in a group or session of) what was inherited. ``batch``, ``bench``,
    the service and the API carry many runs, and keep the rule above."""

    SOURCE = "getrusage(RUSAGE_CHILDREN) + /proc of the live members"
    _open: set[ChildrenUsage] = set()  # this process's runs counted so, not closed yet
    _lock = _thread.allocate_lock()  # a Dask worker runs its chunks' batches on threads
    _made = 0  # runs counted so in this process's life
    _sole = False  # ``sole``: this process carries one run in its life
    _inherited: tuple[frozenset[int], ...] = ()  # ``sole``: the pids, groups, sessions it had below it before
    _unseen = 0  # ``unseen``: the hosts living inside another program, whose code collects children unseen

    def __init__(self) -> None:
        self._start = children()
        self.group: int | None = None  # the run's process group, once its root is cloned
        with ChildrenUsage._lock:
            ChildrenUsage._made += 1
            self._shared = bool(ChildrenUsage._open or ChildrenUsage._unseen)
            for other in ChildrenUsage._open:
                other._shared = True
            ChildrenUsage._open.add(self)

    def close(self) -> None:
        """The run is over (its tree reaped): a run that begins later does not share its counter."""
        with ChildrenUsage._lock:
            ChildrenUsage._open.discard(self)

    @staticmethod
    def reaped(group: int | None) -> None:
        """The one rule for every collection of a child by this process (a run's root, an
        adopted orphan, a process the service started): the child's figures, and those of
        everything it reaped, are in the counter now, so each open run but the one whose
        process group it was (``group``) shares it. None: every open run, for a child known to
        be no run's (a swept leftover, a process the service started: its group is beside the
        point) or whose group could not be read. A member of the run's own group is the run's,
        even one its parent left to the subreaper; one that left the group (``setsid``) is no
        run's. A child of no known owner (an orphan the subreaper adopted) goes through
        ``reaping`` first, before it is collected."""
        if not ChildrenUsage._open:  # the usual case (a cgroup host): no lock taken
            return
        with ChildrenUsage._lock:
            for run in ChildrenUsage._open:
                if group is None or run.group != group:
                    run._shared = True

    @staticmethod
    def unseen(hosts: int) -> None:
        """``hosts`` more (fewer, when negative) hosts inside another program live in this
        process: that program's code (a Dask worker's other tasks) collects children by itself,
        each a ``reaped(None)`` no hook here sees, so every run open while one lives shares the
        counter (null)."""
        with ChildrenUsage._lock:
            ChildrenUsage._unseen += hosts
            if ChildrenUsage._unseen:
                for run in ChildrenUsage._open:
                    run._shared = True

    @staticmethod
    def sole(pids: frozenset[int], groups: frozenset[int], sessions: frozenset[int]) -> None:
        """This process carries one run only, and had ``pids`` below it before that run, in
        ``groups`` and ``sessions`` (``leftovers.Inherited``): an orphan it collects while its only
        run is open is that run's, unless it is one of those or in one of their groups or sessions."""
        ChildrenUsage._sole, ChildrenUsage._inherited = True, (pids, groups, sessions)

    @staticmethod
    def reaping(pid: int) -> None:
        """``reaped`` for an exited child of no known owner about to be collected (still a
        zombie, its ``/proc/<pid>/stat`` readable): its process group read there, only while
        runs are open; in a ``sole`` process, an orphan not inherited is the run's."""
        if ChildrenUsage._open:
            from .members import read_member

            member = read_member(pid)
            if member is not None and ChildrenUsage._the_sole_runs(member):
                return
            ChildrenUsage.reaped(member.pgid if member is not None else None)

    @staticmethod
    def _the_sole_runs(member: Member) -> bool:
        """Whether ``member`` is the open run's, in a process that only ever carried that one (``sole``)."""
        if not ChildrenUsage._sole or ChildrenUsage._made != 1:
            return False
        pids, groups, sessions = ChildrenUsage._inherited
        return member.pid not in pids and member.pgid not in groups and member.session not in sessions

    def offer_to(self, tally: Tally, live: LiveUsage) -> None:
        """Offer ``tally`` this run's CPU and I/O figures, the live members' ``live`` added;
        none where another run shared the counter."""
        if self._shared:
            return
        now = children()
        user = now[0] - self._start[0] + live.user_ns
        system = now[1] - self._start[1] + live.system_ns
        tally.offer_ns("cpu_ns", user + system, self.SOURCE)
        tally.offer_ns("user_ns", user, self.SOURCE)
        tally.offer_ns("system_ns", system, self.SOURCE)
        if live.read_bytes is not None and live.write_bytes is not None:
            tally.offer("io_read_bytes", (now[2] - self._start[2]) * 512 + live.read_bytes, self.SOURCE)
            tally.offer("io_write_bytes", (now[3] - self._start[3]) * 512 + live.write_bytes, self.SOURCE)


def _forked() -> None:
    """A forked child carries none of its parent's runs, and its lock may have been held at the fork."""
    ChildrenUsage._open = set()
    ChildrenUsage._lock = _thread.allocate_lock()
    ChildrenUsage._made, ChildrenUsage._sole = 0, False  # a fork's runs are its own: it says ``sole`` itself
    ChildrenUsage._unseen = 0  # nor its hosts


os.register_at_fork(after_in_child=_forked)


def mechanism(usage: Usage) -> str:
    """Which mechanisms count this run's whole-tree figures in ``resource_summary``'s fields (the
    usage file's): ``cgroup_v1``, ``cgroup_v2``, ``rusage``, joined by ``+`` where several do, or
    ``none`` (``doctor`` names it)."""
    families = []
    for field in RESOURCE_SUMMARY_FIELDS:
        source = usage.sources.get(field, "")
        family = "cgroup_v1" if "(v1)" in source else "cgroup_v2" if "(v2)" in source else None
        if source.startswith("getrusage"):
            family = "rusage"
        if family is not None and family not in families:
            families.append(family)
    return "+".join(families) or "none"
