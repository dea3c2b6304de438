"""Which job starts next: the batch's ready queue, as make keeps one for a graph and nextest for
weighted tests. ``on_host`` asks ``peek`` for the next job that may start now, ``take``s it, and
tells ``ended`` each job's last line; this module holds the rest:

- readiness: a job with ``needs`` becomes ready once each need exited 0 (a need ``--resume``
  skipped, or that is not among the jobs run, counts as met); one whose need failed, was
  cancelled, halted or skipped is itself skipped, and so on down the graph (``graph`` checked the
  ids and the cycles before anything started), while the jobs beside it go on (make ``-k``);
- order: manifest order, or with ``--history`` the longest remaining path first (a job's own
  time plus its longest chain of dependents), so a graph's critical path starts first;
- weights: a job takes ``slots`` of the ``--jobs`` slots (more than there are: all of them); the
  first ready job that does not fit holds back the others, so a wide job is never overtaken for
  ever; its slot numbers are the lowest free ones (``{%}`` is the first);
- groups: at most ``--group-limit NAME=N`` jobs of group NAME at once; a job its group holds
  back waits aside, and the jobs after it go on.
"""

from __future__ import annotations

import heapq
from collections import deque

from ..errors import Failure
from .graph import longest_paths
from .piped import Awaited

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from ..summary_line import JobLine
    from .manifest import Job

RETRY = float("-inf")  # a job to run again goes before every other ready job


class Schedule:
    def __init__(
        self,
        jobs: Iterable[Job],
        capacity: int,
        group_limits: dict[str, int] | None = None,
        took: dict[str, float] | None = None,
        *,
        whole: bool = True,
        read_rest: Callable[[], bool] = lambda: True,
    ):
        """``whole``: the jobs are held at once (a graph, ``--history``'s longest paths); without,
        they are read from ``jobs`` only as they start (a ``manifest.Manifest`` read as it goes),
        so a batch with no graph keeps nothing of the jobs it has not reached or has ended. Such
        a source may give ``piped.Awaited`` where its next job has not come yet (a template's
        pipe): ``awaited`` is then its descriptor, and nothing is ready until it is readable.
        ``read_rest``, asked after a stop: the jobs not read yet are read to be recorded as never
        started (not from a pipe, whose producer may never end)."""
        self._capacity = capacity
        self._limits = group_limits or {}
        self._free = list(range(1, capacity + 1))  # free slot numbers, a heap
        self._slots: dict[str, list[int]] = {}  # running job id -> its slot numbers
        self._in_group: dict[str, int] = {}
        self._held: dict[str, deque[tuple[float, int, Job]]] = {}  # group -> jobs its limit held back
        self._waiting: dict[str, int] = {}  # job id -> needs not yet met
        self._dependents: dict[str, list[Job]] = {}
        self._ready: list[tuple[float, int, Job]] = []
        self._seq = 0
        self._source: Iterator[Job | Awaited] | None = None  # the jobs not read yet (``whole`` false)
        self._read_rest = read_rest
        self.awaited: int | None = None  # the descriptor the source's next job waits on, if it does
        self.failure: Failure | None = None  # the source failed while read (a manifest changed)
        self.unread = False  # reading the rest after a stop failed: those jobs are not recorded
        self.waited_on: dict[str, str] = {}  # job id -> the need it waited for last (the trace's arrows)
        if not whole:
            self._order: dict[str, int] = {}
            self._priority: dict[str, float] = {}
            self._source = iter(jobs)
            return
        held = list(jobs)
        self._order = {job.id: index for index, job in enumerate(held)}
        ids = self._order
        for job in held:
            pending = [need for need in job.plan.needs if need in ids]
            if pending:
                self._waiting[job.id] = len(pending)
                for need in pending:
                    self._dependents.setdefault(need, []).append(job)
        self._priority = longest_paths(held, took) if took is not None else {}
        for job in held:
            if job.id not in self._waiting:
                self._ready.append(self._key(job))
        heapq.heapify(self._ready)
        self._seq = len(held)

    def _read_one(self) -> None:
        """The next job of a source read as it goes, onto the ready heap in its order."""
        assert self._source is not None
        self.awaited = None
        try:
            job = next(self._source)
        except StopIteration:
            self._source = None
            return
        except Failure as failure:
            self.failure, self._source = failure, None
            return
        if isinstance(job, Awaited):
            self.awaited = job.fd
            return
        heapq.heappush(self._ready, (0.0, self._next_seq(), job))

    def _key(self, job: Job) -> tuple[float, int, Job]:
        return (-self._priority.get(job.id, 0.0), self._order[job.id], job)

    def peek(self) -> Job | None:
        """The next job that may start now, or None (none ready, or the first one does not fit)."""
        ready = self._ready
        while True:
            if not ready and self._source is not None:
                self._read_one()
            if not ready:
                return None
            job = ready[0][2]
            group = job.plan.group
            if group is not None and self._in_group.get(group, 0) >= self._limits.get(group, self._capacity):
                self._held.setdefault(group, deque()).append(heapq.heappop(ready))
                continue
            return job if self._width(job) <= len(self._free) else None

    def _width(self, job: Job) -> int:
        return min(job.plan.slots, self._capacity)

    def take(self, job: Job) -> int:
        """``job`` (the one ``peek`` gave) started: its slots and group place taken; its first slot."""
        heapq.heappop(self._ready)
        numbers = [heapq.heappop(self._free) for _ in range(self._width(job))]
        self._slots[job.id] = numbers
        if job.plan.group is not None:
            self._in_group[job.plan.group] = self._in_group.get(job.plan.group, 0) + 1
        return numbers[0]

    def again(self, job: Job) -> None:
        """``job``'s attempt ended and it runs again, before every other ready job."""
        self._release(job)
        heapq.heappush(self._ready, (RETRY, self._next_seq(), job))

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _release(self, job: Job) -> None:
        for number in self._slots.pop(job.id, ()):
            heapq.heappush(self._free, number)
        group = job.plan.group
        if group is not None:
            self._in_group[group] -= 1
            held = self._held.get(group)
            if held:
                heapq.heappush(self._ready, held.popleft())

    def ended(self, job: Job, line: JobLine) -> list[tuple[Job, str, str]]:
        """``job``'s last line is recorded: its dependents made ready (it exited 0) or skipped.
        Returns the jobs skipped, each with the need that failed and how it ended, dependents
        after the job they depend on."""
        self._release(job)
        if line.exit_code == 0:
            for dependent in self._dependents.pop(job.id, ()):
                if dependent.id not in self._waiting:
                    continue  # skipped already, by another need that did not exit 0
                self.waited_on[dependent.id] = job.id
                left = self._waiting[dependent.id] - 1
                if left:
                    self._waiting[dependent.id] = left
                else:
                    del self._waiting[dependent.id]
                    heapq.heappush(self._ready, self._key(dependent))
            return []
        return self.skip_below(job.id, _how(line))

    def skip_below(self, job_id: str, how: str) -> list[tuple[Job, str, str]]:
        """Every job below ``job_id`` in the graph, skipped, each naming its need that did not
        exit 0 (``how`` says how the first one ended)."""
        skipped = []
        below = deque((dependent, job_id, how) for dependent in self._dependents.pop(job_id, ()))
        while below:
            dependent, need, need_how = below.popleft()
            if self._waiting.pop(dependent.id, None) is None:
                continue  # skipped already, by another need
            skipped.append((dependent, need, need_how))
            below.extend((after, dependent.id, "skipped") for after in self._dependents.pop(dependent.id, ()))
        return skipped

    def left(self) -> Iterator[Job]:
        """The jobs never started (a stop, the halt), in the order they would have started."""
        queued = sorted([*self._ready, *(item for held in self._held.values() for item in held)], key=lambda k: k[:2])
        waiting = sorted(
            (job for jobs in self._dependents.values() for job in jobs if job.id in self._waiting),
            key=lambda job: self._order[job.id],
        )
        seen: set[str] = set()
        found = []
        for job in [item[2] for item in queued] + waiting:
            if job.id not in seen:
                seen.add(job.id)
                found.append(job)
        yield from found
        self._ready, self._held = [], {}
        if self._source is not None and not self._read_rest():
            self._source = None
        failure = self.failure
        while self._source is not None:  # never read: in their order, one at a time
            self._read_one()
            if self.awaited is not None:
                break
            while self._ready:
                yield heapq.heappop(self._ready)[2]
        if self.failure is not failure:  # met past the stop: the stop's outcome stands
            self.failure, self.unread = failure, True


def _how(line: JobLine) -> str:
    """How a need ended, in the words a skipped job's line gives."""
    if line.exit_code is None:
        return line.source  # halted, cancelled, skipped
    if line.source == "timeout":
        return "timed out"
    return f"exit {line.exit_code}"


def longest_first(jobs: list, took: dict[str, float]) -> list:
    """The jobs in the order that shortens a skewed batch's makespan (longest processing time
    first): those an earlier summary timed (``took``), longest first, after those it did not
    (they may be long; manifest order among them)."""
    unknown = [job for job in jobs if job.id not in took]
    known = sorted((job for job in jobs if job.id in took), key=lambda job: -took[job.id])
    return unknown + known
