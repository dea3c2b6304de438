"""A batch's ``--out`` read as typed jobs: its ``summary.jsonl``, the one record of every job
(those that never started included), read with bounds, its last line per job winning (a
``--resume`` appends), in the order jobs first appear.

The summary is untrusted input like any stream: each line is bounded, the file is opened without
blocking and only when it is a regular file, a line that is not a job's object is counted and
skipped, and every field is checked for its type as the line is read (``JobLine.read``).
"""

from __future__ import annotations

import datetime
import hashlib
import heapq
import json
import os

from ..summary_line import SUMMARY_FILE, Captured, EarlierAttempt, JobLine
from ..bounded import PAGE_SUMMARY, SUMMARY, Limits
from ..userfiles import open_named
from ..errors import Failure, Kind
from ..plain import Plain
from ..text import killed_by

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

MAX_LINE_BYTES = 1024 * 1024
CHECK_CHUNK = 1024 * 1024  # the early lines' bytes read back at a time, to check them
MAX_JOBS = 2_000_000  # --history's lines: each keeps an id and two numbers
# A page's lines: each job is held as an object of about 2 KB (its command at most ARGS_KEPT
# arguments), so a page takes at most about 0.5 GB besides the summary's own bytes
# (PAGE_SUMMARY); a larger batch's page is refused with one line saying so (docs/batch.md).
PAGE_LINES = 200_000
# The lines the page process reads while the jobs run (about 50 MB held): a larger batch's rest
# is read at the end, so its page's memory is not held beside its running jobs.
EARLY_LINES = 20_000
ARGS_KEPT = 32
MAX_LANES = 256  # the timeline's rows: more jobs at once share the last


class Attempt(Plain):
    """One run of a job (a retried job has several), as the timeline and the trace draw it."""

    job_id: str
    number: int
    start_ms: float
    duration_ms: float
    state: str
    outcome: str
    source: str  # its line's: the JUnit types an earlier attempt's element by it, as the job's failure
    lane: int = 0


class Job(Plain):
    """One job as its last summary line says: ``state`` is one of ``STATES``; times in ms from
    the batch's first start."""

    id: str
    command: list | None
    state: str
    outcome: str  # a few words: "exit 0", "exit 3", "timed out after 1s", "not started: halted"
    exit_code: int | None
    source: str
    message: str | None
    duration_ms: float | None
    attempts: int
    peak_memory: int | None
    cpu_ms: int | None
    start_ms: float | None
    stdout: Captured | None  # the line's captures: a failure may be on either stream
    stderr: Captured | None
    tries: list[Attempt]  # every attempt that ran, the earlier ones of a retried job first
    needs: list[str] = []  # the jobs it waited for (a manifest's ``needs``)
    flaky: bool = False  # failed, then exited 0 on a retry
    started_at: str | None = None  # the line's own start (UTC), for the JUnit suite's timestamp
    run_id: str | None = None  # the last attempt's, which names its capture's layout record
    leaked: int | None = None  # its processes its command's exit left running (the line's ``leaked``)
    leaked_unknown: bool = False  # they could not be counted (the line's ``leaked_unknown``)


class Batch(Plain):
    out: str
    jobs: list[Job]
    attempts: list[Attempt]
    skipped_lines: int
    lanes: int
    wall_ms: float | None
    cpu_ms: int | None  # over the jobs whose CPU was measured; None when none was
    cpu_measured: int  # how many jobs' CPU was measured, of the jobs that ran
    ran: int
    jobs_per_s: float | None
    fullness: float | None  # busy slot time over lanes × wall
    started_s: float | None = None  # its first attempt's start, seconds since the epoch (None: none ran)


def is_batch_out(directory: int) -> bool:
    """Whether the directory given is a batch's ``--out`` (it holds a summary), by its handle
    (``inputs.judged_directory``: reached as a stream's name is, another user's link there not
    looked through), never by its name again."""
    try:
        os.stat(SUMMARY_FILE, dir_fd=directory, follow_symlinks=False)
    except OSError:
        return False
    return True


def load(out: str, gone: frozenset[str] = frozenset(), summary: Summary | None = None) -> Batch:
    """``out``'s jobs but those ``gone`` names (an earlier batch's that a ``--resume`` no longer
    has); a Failure when its summary cannot be read (111) or holds lines but no job's (114). An
    empty one is a batch of no job: a ``--partition`` share that got none. ``summary`` is one
    read in part already (``Summary.early``): only the rest is read.

    Each line becomes its job as it is read, and a job's earlier line (``--resume`` appends) is
    let go of at once: what is held is the jobs, never the lines, so the memory taken stays
    within what ``bounded.PAGE_SUMMARY`` and ``PAGE_LINES`` allow (docs/batch.md)."""
    summary = summary or Summary(out)
    summary.rest()
    last, summary.last = summary.last, {}
    for name in gone:  # read as any other line, then let go of: the others keep their order
        last.pop(name, None)
    if not last and summary.skipped:
        raise Failure(Kind.EVENTS_INVALID, f"{summary.path} holds no job's line")
    jobs = list(last.values())
    del last
    attempts = [attempt for job in jobs for attempt in job.tries]
    origin = min((attempt.start_ms for attempt in attempts), default=0.0)  # epoch ms until here
    for attempt in attempts:
        attempt.start_ms -= origin
    for job in jobs:
        if job.start_ms is not None:
            job.start_ms -= origin
    lanes, at_once = _assign_lanes(attempts)
    wall = max((a.start_ms + a.duration_ms for a in attempts), default=None)
    busy = sum(a.duration_ms for a in attempts)
    measured = [job.cpu_ms for job in jobs if job.cpu_ms is not None]
    ran = sum(job.state != "not_started" for job in jobs)
    return Batch(
        out=out,
        jobs=jobs,
        attempts=attempts,
        skipped_lines=summary.skipped,
        lanes=lanes,
        wall_ms=wall,
        cpu_ms=sum(measured) if measured else None,
        cpu_measured=len(measured),
        ran=ran,
        jobs_per_s=ran / (wall / 1000) if wall else None,
        fullness=busy / (at_once * wall) if wall and at_once else None,
        started_s=origin / 1000 if attempts else None,
    )


def history(path: str) -> tuple[dict[str, float], dict[str, int]]:
    """``batch --history``: each job's last duration and last peak memory (bytes) in an earlier
    summary, by id."""
    took: dict[str, float] = {}
    peaks: dict[str, int] = {}
    for line in _read(path, SUMMARY, MAX_JOBS):
        if line is None:
            continue
        if line.duration_ms is not None:
            took[line.id] = line.duration_ms
        peak = None if line.resources is None else line.resources.peak_memory_bytes
        if peak is not None and peak > 0:
            peaks[line.id] = peak
    return took, peaks


class Summary:
    """A summary's jobs as read so far, each job's last line winning, in the order of its first.
    The page process reads the whole lines there are while the batch's jobs still run
    (``early``), so that at the end only the rest is read (``rest``): the same bytes read the
    same way, the page the same. What was read early is checked at the end against the file's
    first bytes then, and read again when they differ (a summary emptied by a new batch)."""

    def __init__(self, out: str) -> None:
        self.path = os.path.join(out, SUMMARY_FILE)
        self._forget()

    def _forget(self) -> None:
        self.last: dict[str, Job] = {}
        self.skipped = 0
        self._count = 0  # the lines read early, each whole
        self._offset = 0  # where they end
        self._digest = hashlib.blake2b()  # of their bytes
        self._seen = -1  # the file's size at the last look: looked at again once it differs

    def _take(self, line: JobLine | None) -> None:
        if line is None:
            self.skipped += 1
            return
        self.last.pop(line.id, None)  # the latest line, but in the order of the first
        self.last[line.id] = _job(line)

    def early(self) -> bool:
        """The lines written whole since the last look, and whether there were any; one not yet
        ended, over its bounds, or past the summary's (its size, its lines) is left to the end,
        which says why, and so are those past ``EARLY_LINES``. A file whose size is the last
        look's is not read (nothing new, or a line that stopped the reading not yet grown): a
        long batch's idle looks cost an open."""
        most = min(EARLY_LINES, PAGE_LINES)
        if self._count >= most:
            return False
        try:
            fd = open_named(self.path, PAGE_SUMMARY)
        except (OSError, ValueError):  # not there yet, or not to be read: told at the end
            return False
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(fd).st_size
            if size == self._seen:
                return False
            self._seen = size
            handle.seek(self._offset)
            count = self._count
            while self._count < most:
                text = handle.readline(MAX_LINE_BYTES + 1)
                if not text.endswith(b"\n"):
                    break
                self._count += 1
                self._offset += len(text)
                self._digest.update(text)
                self._take(_parsed(text) if len(text) <= MAX_LINE_BYTES else None)
            return self._count > count

    def rest(self) -> None:
        """Every line after those read early, or every line when the early ones are no longer
        the file's first."""
        with os.fdopen(_open(self.path, PAGE_SUMMARY), "rb") as handle:
            if self._offset and not self._same(handle):
                self._forget()
                handle.seek(0)
            for line in _lines(handle, self.path, PAGE_LINES, self._count):
                self._take(line)

    def _same(self, handle) -> bool:
        digest, left = hashlib.blake2b(), self._offset
        while left > 0 and (chunk := handle.read(min(left, CHECK_CHUNK))):
            digest.update(chunk)
            left -= len(chunk)
        return left == 0 and digest.digest() == self._digest.digest()


def _open(path: str, limits: Limits) -> int:
    try:
        return open_named(path, limits)  # another user's link (to /etc/shadow) is not followed
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:  # bounded.InputError: not a regular file, or over its size
        raise Failure(Kind.SETUP, str(exc)) from None


def _read(path: str, limits: Limits, most_lines: int) -> Iterator[JobLine | None]:
    """Each line of the summary as a job's line, read one at a time within ``limits`` and
    ``most_lines`` (None for a line that holds none)."""
    with os.fdopen(_open(path, limits), "rb") as handle:
        yield from _lines(handle, path, most_lines)


def _lines(handle, path: str, most_lines: int, count: int = 0) -> Iterator[JobLine | None]:
    """The lines from where ``handle`` is, the ``count`` before them read already."""
    while text := handle.readline(MAX_LINE_BYTES + 1):
        count += 1
        if count > most_lines:
            raise Failure(Kind.EVENTS_INVALID, f"{path} has more than {most_lines} lines")
        if len(text) > MAX_LINE_BYTES:  # the rest of that line is skipped, never held
            while text and not text.endswith(b"\n"):
                text = handle.readline(MAX_LINE_BYTES)
            yield None
            continue
        yield _parsed(text)


def _parsed(text: bytes) -> JobLine | None:
    try:
        return JobLine.read(json.loads(text))
    except (ValueError, RecursionError):
        return None


def _start_s(text) -> float | None:
    if not isinstance(text, str) or len(text) > 40:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _attempt(job_id: str, number: int, ran: JobLine | EarlierAttempt) -> Attempt | None:
    """An attempt that ran (a start and a duration), its start in ms since the epoch until
    ``load`` places it on the batch's clock."""
    start = _start_s(ran.started_at)
    if start is None or ran.duration_ms is None:
        return None
    state, outcome = _outcome(ran.exit_code, ran.source, ran.signal)
    return Attempt(job_id, number, start * 1000, ran.duration_ms, state, outcome, ran.source)


def _job(line: JobLine) -> Job:
    state, outcome = _outcome(line.exit_code, line.source, line.signal)
    notes = line.notes()
    outcome += notes
    if line.source == "skipped" and line.skipped_for is not None:
        outcome = f"skipped: its need {line.skipped_for} did not exit 0"
    elif line.flaky:
        outcome = f"exit 0, flaky (passed on attempt {line.attempts})" + notes
    earlier = [_attempt(line.id, n, ran) for n, ran in enumerate(line.earlier_attempts, 1)]
    final = _attempt(line.id, line.attempts, line)
    tries = [attempt for attempt in (*earlier, final) if attempt is not None]
    resources = line.resources
    command = line.command
    if command is not None and len(command) > ARGS_KEPT:  # a page shows it as text, cut short
        command = [*command[:ARGS_KEPT], f"…({len(command) - ARGS_KEPT} more)"]
    return Job(
        id=line.id,
        command=command,
        state=state,
        outcome=outcome,
        exit_code=line.exit_code,
        source=line.source,
        message=line.message,
        duration_ms=line.duration_ms,
        attempts=line.attempts,
        peak_memory=None if resources is None else resources.peak_memory_bytes,
        cpu_ms=None if resources is None else resources.total_cpu_ms,
        start_ms=final.start_ms if final is not None else None,
        stdout=line.stdout,
        stderr=line.stderr,
        tries=tries,
        needs=line.needs or [],
        flaky=line.flaky,
        started_at=line.started_at,
        run_id=line.run_id,
        leaked=line.leaked,
        leaked_unknown=line.leaked_unknown,
    )


# A job's state on the page, from its exit and its line's ``source``: a job that ran and did
# not exit 0 is ``failed`` unless its source is in ``RAN``; one that never ran (exit null) is
# ``not_started`` unless its source is in ``NEVER_RAN`` (a lost Dask task's jobs may have run).
# Another state is one more entry, in these tables and in ``batch_page.STATE_ORDER``.
RAN = {
    "timeout": ("timed_out", "timed out (exit {code})"),
    "idle_timeout": ("timed_out", "idle timed out (exit {code})"),
    "cancelled": ("cancelled", "cancelled (exit {code})"),
    "control_cancel": ("cancelled", "cancelled (exit {code}, cancel --run-id)"),
    "control_kill": ("cancelled", "cancelled (exit {code}, kill --run-id)"),
}
NEVER_RAN = {"task_failed": ("task_failed", "task failed")}


def _outcome(code: int | None, source: str, signal: int | None = None) -> tuple[str, str]:
    """An attempt's state and its words; a death by ``signal`` said before its exit, since
    128 + N alone would read as the child's own exit code."""
    if signal is not None and code is not None:
        state, words = _outcome(code, source)
        return state, f"{killed_by(signal)}, {words}"
    if code == 0:
        return "ok", "exit 0"
    if code is None:
        return NEVER_RAN.get(source, ("not_started", f"not started: {source}"))
    state, words = RAN.get(source, ("failed", "exit {code}" if source == "child_exit" else "exit {code} ({source})"))
    return state, words.format(code=code, source=source)


def _assign_lanes(attempts: list[Attempt]) -> tuple[int, int]:
    """Give each attempt a lane, the lowest one free at its start (in start order), so a lane is
    one slot's sequence of runs; returns how many lanes are drawn and how many attempts ran at
    once at most. Past ``MAX_LANES`` (a summary claiming more jobs at once than a batch runs) the
    attempts share the last lane: the timeline's rows, and its memory, stay bounded."""
    free: list[int] = []
    busy: list[tuple[float, int]] = []  # (end, lane), the lane -1 for an attempt in the shared one
    lanes = at_once = 0
    for attempt in sorted(attempts, key=lambda a: a.start_ms):
        while busy and busy[0][0] <= attempt.start_ms:
            lane = heapq.heappop(busy)[1]
            if lane >= 0:
                heapq.heappush(free, lane)
        owned = True
        if free:
            attempt.lane = heapq.heappop(free)
        elif lanes < MAX_LANES:
            attempt.lane, lanes = lanes, lanes + 1
        else:
            attempt.lane, owned = MAX_LANES - 1, False
        heapq.heappush(busy, (attempt.start_ms + attempt.duration_ms, attempt.lane if owned else -1))
        at_once = max(at_once, len(busy))
    return lanes, at_once
