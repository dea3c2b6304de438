"""Running a batch: its jobs as runs on one host, at most ``jobs`` at once, each a full run
(its own containment group, stream, capture, deadlines and publication), with a summary line
written as each one ends.

The host's signal watch is the batch's: a stop signal ends every running job (each stream ends
with its cancellation, as ``run``'s would) and no job starts after it; the jobs not started are
recorded as such. ``halt_on_failure`` starts no job after the first failure and lets the running
ones finish; ``retries`` runs a failed job again, up to that many more times.
"""

from __future__ import annotations

import errno
import os
import time

from ..engine.endings import Outcome
from ..engine.host import Host
from ..engine.runner import steps
from .. import safepath
from ..diagnostics import warn
from ..errors import Failure, Kind
from ..fdlimit import runs_that_fit
from ..jsontext import dumps
from . import summary
from .held import HeldFiles, settle
from .limits import JobTimeout, MemoryBudget, Timeouts
from .manifest import Job, job_spec
from .outdir import ensure_directory, prepare_out

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


class Settings:
    """How a batch runs its jobs (the CLI's flags, the API's keywords)."""

    __slots__ = (
        "out",
        "jobs",
        "retries",
        "halt_on_failure",
        "resume",
        "label",
        "timeout",
        "memory_budget",
        "peaks",
        "keep_failed_only",
    )

    def __init__(
        self,
        out: str,
        jobs: int | None = None,
        retries: int = 0,
        halt_on_failure: bool = False,
        resume: bool = False,
        label: str | None = None,
        timeout: JobTimeout | None = None,
        memory_budget: int | None = None,
        peaks: dict[str, int] | None = None,
        keep_failed_only: bool = False,
    ):
        self.out = out
        self.jobs = jobs if jobs is not None else (len(os.sched_getaffinity(0)) or 1)
        self.retries = retries
        self.halt_on_failure = halt_on_failure
        self.resume = resume
        self.label = label or f"batch-{os.getpid()}-{time.time_ns()}"  # what `list` shows per job
        self.timeout = timeout  # --timeout: each job's, unless it gives its own
        self.memory_budget = memory_budget  # --memory-budget, in bytes
        self.peaks = peaks or {}  # --history's peak memory per job id (the budget's expectations)
        self.keep_failed_only = keep_failed_only  # --keep failed: a passing job's files are never written


class Tally:
    """What the batch's ending line and exit code say."""

    __slots__ = ("total", "skipped", "succeeded", "failed", "timed_out", "not_started", "cancelled_by")

    def __init__(self, total: int):
        self.total = total
        self.skipped = 0  # --resume: exited 0 in an earlier batch
        self.succeeded = 0
        self.failed = 0
        self.timed_out = 0
        self.not_started = 0
        self.cancelled_by: str | None = None

    def count(self, line: dict) -> None:
        """Count a job's summary line."""
        code = line["exit_code"]
        if code is None:
            self.not_started += 1
        elif code == 0:
            self.succeeded += 1
        elif line["source"] == "timeout":
            self.timed_out += 1
        else:
            self.failed += 1

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed + self.timed_out

    def line(self) -> str:
        parts = [f"{self.succeeded} of {self.total} jobs exited 0"]
        for count, words in (
            (self.failed, "failed"),
            (self.timed_out, "timed out"),
            (self.not_started, "not started"),
            (self.skipped, "skipped (--resume)"),
        ):
            if count:
                parts.append(f"{count} {words}")
        if self.cancelled_by is not None:
            parts.append(f"cancelled by {self.cancelled_by}")
        return ", ".join(parts)


def run_batch(
    jobs: list[Job],
    settings: Settings,
    on_finished: Callable[[dict, Tally], None] | None = None,
    *,
    signals: bool = True,
    write_summary: bool = True,
    keep_lines: bool = True,
    stop_fd: int | None = None,
    on_tick: Callable[[dict[str, float], Tally], None] | None = None,
) -> tuple[list[dict], Tally]:
    """Run ``jobs``; returns their summary lines (finishing order; none without ``keep_lines``,
    so a long batch run from the CLI stays flat in memory) and the tally.

    ``signals``: the batch owns the process's stop signals (the CLI); the API and a Dask worker
    leave their process's handlers alone. ``write_summary``: lines go to ``summary.jsonl`` as
    jobs end (a Dask worker returns them to the client, which writes them instead). ``stop_fd``: once it
    is readable (the name of a stop's source written to it) the batch stops as on a stop signal:
    how a Dask worker's chunk, which owns no signal, is stopped from another thread. ``on_tick``:
    called every second on the batch's loop with the jobs running (id -> the monotonic second
    each started) and the tally, so a progress bar moves between job ends."""
    at_once = runs_that_fit(settings.jobs)  # before anything is made: none fitting fails the batch
    out, summary_path, queue, tally = prepare(jobs, settings)
    queue.reverse()  # popped from the end: manifest order
    attempts: dict[str, int] = {}
    earlier: dict[str, list[dict]] = {}  # a retried job's earlier attempts, kept in attempt-N/
    lines: list[dict] = []
    summary_fd = open_summary(summary_path, settings.resume) if write_summary else None
    carrier = Host(watch=signals)
    halted = False
    timeouts = Timeouts(settings.timeout)
    budget = None if settings.memory_budget is None else MemoryBudget(settings.memory_budget, queue, settings.peaks)
    running: dict[str, float] = {}

    def record(line: dict) -> None:
        if keep_lines:
            lines.append(line)
        if summary_fd is not None:
            os.write(summary_fd, dumps(line).encode() + b"\n")
        if on_finished is not None:
            on_finished(line, tally)

    def next_run():
        if carrier.stopped is not None or halted or not queue:
            return None
        if budget is not None:
            if not budget.admits(queue[-1]):
                return None  # asked again as a job ends
            budget.started(queue[-1])
        job = queue.pop()
        attempts[job.id] = attempts.get(job.id, 0) + 1
        running[job.id] = time.monotonic()
        return _job_steps(
            carrier, job, out, settings.label, attempts[job.id], timeouts.limit_ms(), settings.keep_failed_only
        )

    def finished(result) -> None:
        nonlocal halted
        job, outcome, run_id, dropped = result
        running.pop(job.id, None)
        line = summary.summary_line(
            job, run_id, attempts[job.id], outcome, summary.written_objects(outcome), earlier.get(job.id)
        )
        if dropped:
            summary.drop_paths(line)
        timeouts.ended(line)
        if budget is not None:
            budget.ended(job, line)
        if outcome.code != 0 and carrier.stopped is None and attempts[job.id] <= settings.retries:
            earlier.setdefault(job.id, []).append(summary.attempt_record(line))
            queue.append(job)  # again, next
            return
        earlier.pop(job.id, None)
        tally.count(line)
        halted = halted or (outcome.code != 0 and settings.halt_on_failure)
        record(line)

    pinned = False
    try:
        try:
            safepath.pin(out)  # each job's five files are made under it: walked from there, not from /
            pinned = True
        except OSError:
            pass  # gone or changed since prepare: each job's walk from / says so
        carrier.watch_signals()
        if stop_fd is not None:
            carrier.loop.add_reader(stop_fd, lambda: carrier.stop(os.read(stop_fd, 64).decode() or "ctrl_c"))
        carrier.lodge(settings.label)  # the jobs' sockets, records and tombstones in one directory
        if on_tick is not None:
            _every_second(carrier, lambda: on_tick(running, tally))
        carrier.carry_all(next_run, finished, at_once)
    finally:
        tally.cancelled_by = carrier.stopped
        for job in reversed(queue):
            reason = "cancelled" if carrier.stopped is not None else "halted"
            line = summary.not_started_line(job, attempts.get(job.id, 0), reason)
            tally.count(line)
            record(line)
        if summary_fd is not None:
            os.close(summary_fd)
        carrier.close()
        if pinned:
            safepath.unpin(out)
    return lines, tally


def prepare(jobs: list[Job], settings: Settings) -> tuple[str, str, list[Job], Tally]:
    """``--out`` made or checked, where its summary goes, the jobs left to run (all but those
    ``--resume`` skips), and the tally that counts the skipped ones."""
    out = prepare_out(settings.out)
    summary_path = os.path.join(out, "summary.jsonl")
    done = summary.finished_jobs(summary_path) if settings.resume else {}
    todo = []
    for job in jobs:
        if job.id not in done:
            todo.append(job)
        elif done[job.id] not in (None, job.digest):
            warn(
                f"{job.id}: the job changed since it exited 0 (job_sha256 {done[job.id]} is now {job.digest}): run again"
            )
            todo.append(job)
    tally = Tally(len(jobs))
    tally.skipped = len(jobs) - len(todo)
    return out, summary_path, todo, tally


def open_summary(path: str, resume: bool) -> int:
    """``summary.jsonl``, appended to on ``--resume``, else started afresh; never through a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        return os.open(path, flags if resume else flags | os.O_TRUNC, 0o644)
    except OSError as exc:
        why = "it is a symbolic link, and a link is never followed" if exc.errno == errno.ELOOP else exc.strerror
        raise Failure(Kind.SETUP, f"cannot write the summary {path}: {why}") from None


def _every_second(host: Host, call: Callable[[], None]) -> None:
    """``call`` now, then once a second on ``host``'s loop while it turns (its close drops the
    timer)."""

    def tick() -> None:
        call()
        host.loop.call_later(1.0, tick)

    tick()


def _stream_path(out: str, job: Job) -> str:
    return os.path.join(out, job.id, "events.jsonl")


def _job_steps(
    host: Host, job: Job, out: str, label: str, attempt: int, timeout_ms: int | None, keep_failed_only: bool
):
    """One attempt of ``job`` as a run's steps; returns (job, outcome, run id, whether its files
    were dropped). Labelled with the batch, so ``list`` shows which batch a live job belongs to.
    The attempt before a retry keeps its stream and capture: they move into ``attempt-N/`` of
    the job's directory. With ``keep_failed_only`` the attempt writes into memfds (``held``),
    and only a failed one's files reach the job's directory; a ring capture (``capture_keep``
    tail or head-tail) is written in place as always."""
    directory = os.path.join(out, job.id)
    held = None
    try:
        hold = keep_failed_only and job.template.capture_keep == "head"
        if not hold or attempt > 1:
            ensure_directory(directory, "the job directory")
        if attempt > 1:
            _keep_attempt(directory, attempt - 1)
        if hold:
            held = HeldFiles()
    except Failure as failure:
        return job, Outcome(failure.code, failure), None, False
    try:
        spec = job_spec(
            job,
            jsonl=_stream_path(out, job),
            capture_dir=os.path.join(directory, "capture"),
            label=label,
            timeout_ms=timeout_ms,
            held_fds=None if held is None else held.for_engine(),
        )
        outcome = yield from steps(host, spec, summary.SUMMARY_EVENTS, final_usage=False)
        kept = held is None or settle(held, outcome.code != 0, spec.jsonl, spec.capture_dir or directory)
        return job, outcome, spec.run_id, not kept
    finally:
        if held is not None:
            held.close()


def _keep_attempt(directory: str, attempt: int) -> None:
    """Move the last attempt's stream and capture into ``attempt-N`` of the job's directory
    (renames in a directory ``ensure_directory`` checked is the caller's own)."""
    kept = ensure_directory(os.path.join(directory, summary.attempt_dir(attempt)), "the attempt's directory")
    for name in ("events.jsonl", "capture"):
        try:
            os.rename(os.path.join(directory, name), os.path.join(kept, name))
        except FileNotFoundError:
            pass  # that attempt failed before making it
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot keep attempt {attempt} of {directory}: {exc.strerror}") from None
