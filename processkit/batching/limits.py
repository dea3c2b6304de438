"""The batch's own limits on its jobs: ``--jobs`` (a number, or GNU parallel's forms relative to
the CPUs), ``--timeout`` (an absolute duration, or a share of the
median duration of the jobs that exited 0 so far, as GNU parallel's ``--timeout 200%``) and
``--memory-budget`` (start a job only while the expected peaks of the running ones fit).

Both are decided as a job starts: a relative limit is the median at that moment (fixed for that
attempt), and a job is admitted against the reservations of the jobs running then.
"""

from __future__ import annotations

import math
import os
import re
from fractions import Fraction
from heapq import heappop, heappush

from ..grammar.values import parse_count, parse_duration_ms, parse_size, split_duration
from ..errors import usage
from ..text import cut

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..summary_line import JobLine
    from collections.abc import Iterable

    from .manifest import Job

MAX_JOBS_IN_FLIGHT = 4096
AS_MANY_AS_FIT = 0  # --jobs 0: as many at once as the open-file limit allows (up to the most)
JOBS_FLAG = "--jobs <N>"
# How long a job's output pipes a process it left holds past its command's exit are read before
# that exit ends the job (its leak counted, the process killed): nextest's ``leak-timeout``
# default (100 ms), which it waits past a test's exit for its standard output and error to close
# before it marks the test leaky. Not ``run``'s 5 s (the reference's): a batch farm pays at most
# this per leaking job, and a job's deadline has no 5 s to overtake its command's exit in.
LEAK_TIMEOUT_SECONDS = 0.1
MAX_RETRIES = 1000  # --retries N / retries=: N more attempts, at most this many
# parallel's +N, -N and P%; leading zeros are skipped, the digits after them bounded (no huge
# int or float to make of a long text)
RELATIVE_JOBS = re.compile(r"([+-])0*([0-9]{1,9})|0*([0-9]{1,9}(?:\.[0-9]{1,9})?)%")
MEDIAN_AFTER = 5  # a relative --timeout applies once this many jobs exited 0
MAX_PERCENT = 1_000_000.0
TIMEOUT_FLAG = "--timeout <DUR|P%>"
PERCENT = re.compile(r"[0-9]{1,7}(\.[0-9]{1,6})?%")


class JobTimeout:
    """``--timeout``: ``absolute_ms`` for every job, or ``percent`` of the running median."""

    __slots__ = ("absolute_ms", "percent")

    def __init__(self, absolute_ms: int | None = None, percent: float | None = None):
        self.absolute_ms = absolute_ms
        self.percent = percent


def parse_timeout(text: str) -> JobTimeout:
    """``DUR`` (run's grammar: ``^[0-9]+(ms|s|m|h)?$``) or ``P%`` (``^[0-9]+(\\.[0-9]+)?%$``, above 0)."""
    if split_duration(text) is not None:
        return JobTimeout(absolute_ms=parse_duration_ms(text, TIMEOUT_FLAG, positive=True))
    value = float(text[:-1]) if PERCENT.fullmatch(text) else None
    if value is None or not 0 < value <= MAX_PERCENT:
        raise usage(
            f"invalid value '{cut(text)}' for '{TIMEOUT_FLAG}': expected a whole number with an optional "
            f"unit ms, s, m or h, or a percentage above 0 and at most {MAX_PERCENT:.0f}% (300%)"
        )
    return JobTimeout(percent=value)


def usable_cpus() -> int:
    """The CPUs this process may run on: ``--jobs``'s default and what its relative forms count from."""
    return len(os.sched_getaffinity(0)) or 1


def parse_jobs(text: str) -> int:
    """``N`` (0: ``AS_MANY_AS_FIT``), or GNU parallel's ``+N``, ``-N`` and ``P%`` of the CPUs
    (rounded up); a form that leaves no job to run is a usage error, as the installed parallel
    refuses it ("Cannot run any jobs")."""
    relative = RELATIVE_JOBS.fullmatch(text)
    if relative is None and not text.startswith(("+", "-")) and not text.endswith("%"):
        return parse_count(text, JOBS_FLAG, low=0, high=MAX_JOBS_IN_FLIGHT)
    cpus = usable_cpus()
    if relative is None:
        raise usage(
            f"invalid value '{cut(text)}' for '{JOBS_FLAG}': expected +N or -N (the CPUs plus or minus N) "
            f"or P% of the CPUs (up to 9 digits each side of a point), giving from 1 to {MAX_JOBS_IN_FLIGHT} "
            f"jobs at once on {cpus} CPU(s)"
        )
    sign, number, percent = relative.groups()
    if percent is not None:
        count = math.ceil(Fraction(percent) * cpus / 100)
    else:
        count = cpus + int(number) if sign == "+" else cpus - int(number)
    if not 1 <= count <= MAX_JOBS_IN_FLIGHT:
        raise usage(
            f"invalid value '{cut(text)}' for '{JOBS_FLAG}': it gives {count} jobs at once on "
            f"{cpus} CPU(s); expected from 1 to {MAX_JOBS_IN_FLIGHT}"
        )
    return count


def parse_budget(text: str) -> int:
    return parse_size(text, "--memory-budget <SIZE>")


class Timeouts:
    """Each attempt's batch-level timeout (a job's own ``timeout`` wins over it: ``job_spec``)."""

    def __init__(self, rule: JobTimeout | None):
        self._rule = rule
        self._low: list[float] = []  # the smaller half of the durations, negated (a max-heap)
        self._high: list[float] = []  # the larger half

    def limit_ms(self) -> int | None:
        rule = self._rule
        if rule is None:
            return None
        if rule.percent is None:
            return rule.absolute_ms
        if len(self._low) + len(self._high) < MEDIAN_AFTER:
            return None
        return max(1, math.ceil(self.median() * rule.percent / 100))

    def ended(self, line: JobLine) -> None:
        """Count an attempt's duration when it exited 0."""
        if self._rule is None or self._rule.percent is None:
            return
        if line.exit_code == 0 and line.duration_ms is not None:
            self._add(float(line.duration_ms))

    def _add(self, value: float) -> None:
        if self._low and value > -self._low[0]:
            heappush(self._high, value)
        else:
            heappush(self._low, -value)
        if len(self._low) > len(self._high) + 1:
            heappush(self._high, -heappop(self._low))
        elif len(self._high) > len(self._low):
            heappush(self._low, -heappop(self._high))

    def median(self) -> float:
        if len(self._low) > len(self._high):
            return -self._low[0]
        return (-self._low[0] + self._high[0]) / 2


ALONE = -1  # a reservation that lets nothing run beside it


class MemoryBudget:
    """``--memory-budget``: admission by expected peaks.

    A job's expected peak is its ``peak_memory_bytes`` in ``--history``, else its ``max_memory``.
    A job without one is reckoned as large as the largest peak the batch knows of (the largest
    expected peak in the manifest, or the largest peak measured of a job that ended in this
    batch). The budget is tight for a job when that reckoning does not fit beside the running
    jobs' reservations; a job then waits. A job runs alone (it starts only when none runs, and
    none starts beside it) when its reckoning exceeds the budget, or when it has no expected
    peak and the batch knows of no peak yet. Jobs start in order: one that does not fit holds
    back those after it, so a large job is never overtaken for ever."""

    def __init__(self, budget: int, jobs: Iterable[Job], peaks: dict[str, int]):
        self._budget = budget
        self._peaks = peaks
        self._largest = max((peak for job in jobs if (peak := self.expected(job)) is not None), default=None)
        self._running: dict[str, int] = {}  # job id -> its reservation (bytes, or ALONE)
        self._reserved = 0

    def expected(self, job: Job) -> int | None:
        peak = self._peaks.get(job.id)
        return peak if peak is not None else job.template.limits.max_memory

    def _reckoned(self, job: Job) -> int:
        peak = self.expected(job)
        if peak is None:
            peak = self._largest
        return ALONE if peak is None or peak > self._budget else peak

    def admits(self, job: Job) -> bool:
        if not self._running:
            return True
        need = self._reckoned(job)
        return need != ALONE and self._reserved != ALONE and self._reserved + need <= self._budget

    def started(self, job: Job) -> None:
        need = self._reckoned(job)
        self._running[job.id] = need
        self._reserved = ALONE if need == ALONE else self._reserved + need

    def ended(self, job: Job, line: JobLine) -> None:
        need = self._running.pop(job.id, 0)
        self._reserved = 0 if need == ALONE else self._reserved - need
        peak = None if line.resources is None else line.resources.peak_memory_bytes
        if peak is not None and peak > 0 and (self._largest is None or peak > self._largest):
            self._largest = peak
