"""How busy the host was while a benchmark ran: the CPU time other processes took, as a share of
every CPU's time, so the gate (``gate.py``) can tell a slower command from a busier machine.

The busy time is ``/proc/stat``'s line of each CPU the runs may use (its user, nice, system,
irq, softirq and steal ticks: steal is a KVM guest's time taken by the host's other guests),
less this process's own CPU and that of the children it reaped (``getrusage``: every run's
tree, which ``bench`` reaps as their parent and subreaper). What remains over the benchmark's
wall time is the others' load: 0.0 on idle CPUs, 1.0 when they kept every one of them busy.
The CPUs are this process's affinity as the load begins to be measured: ``--cpus``' (``bench``
is pinned by then), else the set it was started with (a container's cpuset, a ``taskset``);
where ``/proc/stat`` does not name each of them (lxcfs numbers a container's CPUs from cpu0),
every CPU line it shows.
Before, every CPU of the host was counted: a neighbour that kept the runs' own CPU busy was
spread over all the others, so on a host of eight CPUs ``--cpus 0`` beside a process spinning
on CPU 0 read 0.125, not busy, and the gate failed the command on a wall time the neighbour
had doubled. A run's own wall time does not say this: a command that sleeps and one that
waits for a CPU look alike there.

The ticks are the kernel's USER_HZ (10 ms): over a benchmark's seconds that is well within
the tenths the gate looks at. Two reads per benchmark, none per run. A CPU quota's holding of
the runs, which leaves the CPUs idle and so is no one else's load, is read beside it at the
same two moments (``throttle.py``); ``Load`` is both as the gate weighs them.
"""

from __future__ import annotations

import os
import resource
import time

from ..containment import cgroupfs
from ..containment.members import status_fields
from ..errors import Failure, Kind
from ..plain import Plain
from . import throttle
from .options import BY_DEST

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..grammar import Naming

BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal (idle and iowait are not)
STEAL_FIELD = 7  # a KVM guest's time its host gave to others: also read alone (``steal_share``)
# Others took a quarter of the runs' CPUs' time or more, or a quota held the runs back as long: busy
BUSY_SHARE = 0.25
NOTICED = 0.005  # a quota's holding or steal beyond this the gate counts (up to it, "0 %" once rounded: not)


class Load(Plain):
    """One benchmark's ``host_load`` as the gate weighs it: what others took of the runs' CPUs,
    the share of the time a CPU quota held the runs back, and that quota (CPUs); the size of the
    runs' affinity and the share of their CPUs' time a hypervisor stole (``gate_off_cpu``); each
    None where it was not read."""

    others: float | None = None
    throttled: float | None = None
    quota: float | None = None
    affinity: int | None = None  # how many CPUs the runs were given (1: their waits for a CPU are whole)
    steal: float | None = None

    @classmethod
    def of(cls, load: dict | None) -> Load | None:
        """From an export's ``host_load`` (``others_share``'s keys), None where it has none."""
        if not load:
            return None
        return cls(
            load.get("others_cpu_share"),
            load.get("throttled_share"),
            load.get("cpu_quota"),
            load.get("affinity_cpus"),
            load.get("steal_share"),
        )

    def held(self) -> float:
        """The share of the time the runs could not have a CPU: the largest of the others' load,
        the quota's holding (the two overlap: runs kept waiting by others use less of the quota),
        and, once the quota alone held them back as long as a busy machine does (``BUSY_SHARE``),
        what a quota under one CPU leaves a CPU-bound run, ``1 - quota``: the holding is read
        over the whole benchmark, the gaps between runs too, and reads lower (0.65 where 0.1 CPU
        stretched gzip's runs tenfold). A slighter holding (a pod's limit that bench's own
        start-up bursts met) is allowed for as it was read, never as ``1 - quota``: 0.006 under
        0.5 CPU allowed a slowdown of 100 %. 0.0 where none is known."""
        return max(self.others or 0.0, self.quota_held())

    def quota_held(self) -> float:
        """``held`` less the others' load: what the quota alone kept from the runs, which it keeps
        from each run whatever else the machine does (the others' share is the machine's: a
        command may still have had a CPU of its own beside it)."""
        quota = 1 - self.quota if self.quota is not None and (self.throttled or 0.0) >= BUSY_SHARE else 0.0
        return max(self.throttled or 0.0, quota)

    def noticed(self) -> bool:
        """A CPU quota held the runs back (more than ``NOTICED`` of the time: 1 % once rounded)."""
        return (self.throttled or 0.0) > NOTICED


class Sample:
    """The busy CPU time of ``cpus`` (the affinity, when not given), this process's own, the
    time the quota ``groups`` (``throttle.groups``, when not given) held their tasks back, and the
    clock, at one moment (ns)."""

    __slots__ = ("busy_ns", "steal_ns", "own_ns", "at_ns", "cpus", "groups", "held")

    def __init__(self, cpus: frozenset[int] | None = None, groups: list[str] | None = None) -> None:
        tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
        self.cpus = frozenset(os.sched_getaffinity(0)) if cpus is None else cpus
        lines: dict[int, int] = {}
        steals: dict[int, int] = {}
        for line in cgroupfs.read_bytes("/proc/stat").split(b"\n"):
            name, _, rest = line.partition(b" ")
            if name[:3] == b"cpu" and name[3:].isdigit():
                fields = rest.split()
                lines[int(name[3:])] = sum(int(fields[index]) for index in BUSY_FIELDS if index < len(fields)) * tick_ns
                steals[int(name[3:])] = int(fields[STEAL_FIELD]) * tick_ns if STEAL_FIELD < len(fields) else 0
        # A /proc/stat numbered otherwise than the affinity (lxcfs shows a container's CPUs as
        # cpu0 on): every line it shows, the aggregate's parts.
        shown = self.cpus if self.cpus <= lines.keys() else lines.keys()
        if not shown:
            raise ValueError("no line of /proc/stat names a CPU")
        self.busy_ns = {cpu: lines[cpu] for cpu in shown}
        self.steal_ns = {cpu: steals[cpu] for cpu in shown}
        own = 0.0
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
            used = resource.getrusage(who)
            own += used.ru_utime + used.ru_stime
        self.own_ns = int(own * 1e9)
        self.groups = throttle.groups() if groups is None else groups
        self.held = throttle.read(self.groups)
        self.at_ns = time.monotonic_ns()


def start(cpus: frozenset[int] | None = None, groups: list[str] | None = None) -> Sample | None:
    """A sample, or None where ``/proc/stat`` cannot be read (the share is then unknown)."""
    try:
        return Sample(cpus, groups)
    except (OSError, ValueError, IndexError):
        return None


def others_share(since: Sample | None) -> dict | None:
    """What others took of ``since``'s CPUs since then: ``{"others_cpu_share", "cpus",
    "affinity_cpus", "steal_share", "seconds", "throttled_share", "cpu_quota"}`` (the share of
    those CPUs' time, 0 to 1; ``cpus``: how many were counted, those online at both reads, and
    ``affinity_cpus`` how many the runs were given, which lxcfs's one line may not show; the
    share of their time a hypervisor stole, part of the others'; the share of the time a CPU
    quota held the runs back and the quota, ``throttle.held_back``, both None where no group's
    throttling could be read), or None where it cannot be known."""
    now = start(since.cpus, since.groups) if since is not None else None
    if since is None or now is None or now.at_ns <= since.at_ns:
        return None
    counted = since.busy_ns.keys() & now.busy_ns.keys()
    if not counted:
        return None
    capacity = (now.at_ns - since.at_ns) * len(counted)
    busy = sum(now.busy_ns[cpu] - since.busy_ns[cpu] for cpu in counted)
    others = busy - (now.own_ns - since.own_ns)
    steal = sum(now.steal_ns[cpu] - since.steal_ns[cpu] for cpu in counted)
    share, steal_share = (min(max(part / capacity, 0.0), 1.0) for part in (others, steal))
    throttled, quota = throttle.held_back(since.held, now.held, now.at_ns - since.at_ns)
    return {
        "others_cpu_share": round(share, 3),
        "cpus": len(counted),
        "affinity_cpus": len(since.cpus),
        "steal_share": round(steal_share, 3),
        "seconds": round((now.at_ns - since.at_ns) / 1e9, 3),
        "throttled_share": throttled,
        "cpu_quota": quota,
    }


class RssFloor:
    """bench's memory's high-water mark (``own_high_water``) read after one command's timed runs,
    where it may matter: ``high`` is at least what any of its runs was spawned from. bench grows
    as it runs, so a reading taken at its end could exceed every run's reading."""

    __slots__ = ("first", "high")

    def __init__(self) -> None:
        self.first: int | None = None  # after its first run: every later run was spawned from this or more
        self.high: int | None = None

    def after(self, reading: int | None) -> None:
        """After a run that read ``reading`` (its ``ru_maxrss``): bench's mark read after the first
        run, and again after one that read more than the last mark read (a run's floor is at most
        its reading, so a run reading no more was spawned from no more): a read of ``/proc`` only
        now and then for a command smaller than bench. A command larger than bench reads more than
        ``high`` every run, so each of its runs reads ``/proc`` (10-20 µs) that tells nothing (no
        note is said when a run reads above the floor); it is taken after the run's clock stops,
        so no timed figure holds it, only the session's time per run."""
        if self.high is None or (reading is not None and reading > self.high):
            self.high = own_high_water()
            self.first = self.high if self.first is None else self.first

    def low(self, runs: list) -> int | None:
        """A floor no run of ``runs`` (the command's, in order) read below: what bench held after
        the first, which every later run was spawned from, or that first run's own reading if lower."""
        first = runs[0].memory if runs else None
        return self.first if first is None or self.first is None else min(first, self.first)

    @staticmethod
    def exported(floors: list[RssFloor], indices) -> dict:
        """The export's ``max_rss_floor_byte``, the most any run of these commands was spawned from
        (the highest ``high``; bench's own now where no run was timed): runs of a command whose own
        ``high`` stood lower may read below it. And ``max_rss_floors_byte``, each result's own
        (``indices``: the results' commands), null where none of its runs was timed."""
        top = max((floor.high for floor in floors if floor.high is not None), default=own_high_water())
        return {"max_rss_floor_byte": top, "max_rss_floors_byte": [floors[i].high for i in indices]}


def own_high_water() -> int | None:
    """This process's memory's resident high-water mark (``VmHWM``, bytes; None where ``/proc``
    cannot say): the floor of a run's ``ru_maxrss``. ``execve`` records in the process's
    ``maxrss`` the high-water mark of the memory it replaces; a child cloned with the spawner's
    memory (``CLONE_VM``, as ``posix_spawn`` and the native spawn do) replaces the spawner's, so
    no run reads below the spawner's at its spawn (hyperfine's runs read hyperfine's, likewise).
    Not this process's own ``ru_maxrss``: that holds the mark of the memory bench's own ``execve``
    replaced, its launcher's (a 45 MiB test runner's), which no run of bench's inherits."""
    try:
        status = cgroupfs.read_bytes("/proc/self/status")
    except OSError:
        return None
    found = status_fields(status, (b"VmHWM",)).get(b"VmHWM", b"").split()
    return int(found[0]) * 1024 if found and found[0].isdigit() else None


def pin(cpus: tuple[int, ...] | None, named: Naming) -> set[int] | None:
    """Pin this process, and so every run it starts, to ``cpus``; the previous set to restore."""
    if cpus is None:
        return None
    previous = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        given = named.given(BY_DEST["cpus"], ",".join(map(str, cpus)))
        raise Failure(Kind.SETUP, f"cannot pin to {given}: {exc.strerror}") from None
    return previous
