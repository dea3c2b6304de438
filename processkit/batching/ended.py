"""The line of a job read back from its stream, for a Dask task that failed as a whole: the
worker that ran the task is gone with the lines it would have returned, but a job whose stream
(on the shared ``--out``) ends with ``runner_exit`` did end, and that stream says how.

Facts the reading leans on:
- a stream counts as this batch's only when its ``run_started`` carries the batch's label (an
  earlier batch into the same ``--out`` left streams at the same paths);
- a stream is the job's last attempt's: an attempt before a retry is moved into ``attempt-N/``
  when the next one starts, so those directories are the earlier attempts;
- the stream's times are in milliseconds, so a duration read back is to the millisecond (the
  worker measures to the microsecond), from the spawn's ``run_started`` to ``root_exited``; the
  worker's line ends at the root's reaping, which no event stamps: ``root_exited`` comes once
  the exit ended the run, after the job's pipes reached end of file, so where a process the job
  left held them the duration read back is up to ``limits.LEAK_TIMEOUT_SECONDS`` (100 ms) longer;
- a leak (processes of the tree still running when the root's exit ended the run) is the
  ``members_before`` of the stream's ``cleanup_started``, the count the worker's line had; a
  child's death by a signal is its ``root_exited``'s ``signal`` where the child's exit ended it;
- a pids cap that refused a fork is the stream's ``limit_evidence`` (``processes`` tripped), as
  the worker's line read it; the OOM kill count is in no event (``resourceSummary`` takes no new
  property): the task's record keeps it (``began.oom_kills``), by the run id of the attempt;
- what no stream holds stays unknown: the runner's own message for an ending it decided, and
  under ``--keep failed`` a passing job's stream, which was never written into ``--out``.
"""

from __future__ import annotations

import datetime
import os

from ..events.follow import read_all
from ..events.types import (
    CleanupStarted,
    LimitEvidence,
    OutputCaptured,
    ResourceSummary,
    RootExited,
    RunnerExit,
    RunStarted,
)
from ..summary_line import Captured, EarlierAttempt, JobLine, Resources, attempt_dir
from .began import earlier, oom_kills
from .job_lines import for_job, not_started, pids_refused
from ..text import plural
from ..rundir import BATCH_LABEL

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .manifest import Job

STREAM = "events.jsonl"


class _Ended:
    """What one attempt's ended stream says."""

    __slots__ = (
        "run_id",
        "started_at",
        "duration_ms",
        "exit",
        "resources",
        "captured",
        "leaked",
        "leaked_unknown",
        "signal",
        "processes",
    )

    def __init__(self, events: list) -> None:
        first: dict[type, object] = {}
        for event in events:
            first.setdefault(type(event), event)
        started, exited = first.get(RunStarted), first.get(RootExited)
        self.run_id = started.run_id if isinstance(started, RunStarted) else None
        self.started_at = started.time if isinstance(started, RunStarted) else None
        self.duration_ms = _between(self.started_at, exited.time if isinstance(exited, RootExited) else None)
        self.exit: RunnerExit = events[-1]
        # the child's own death by a signal (not the runner's teardown), as the worker's line had it
        self.signal = exited.signal if isinstance(exited, RootExited) and self.exit.source == "child_exit" else None
        resources = first.get(ResourceSummary)
        self.resources = Resources.read(resources.to_json()) if isinstance(resources, ResourceSummary) else None
        self.captured = first.get(OutputCaptured)
        cleanup = first.get(CleanupStarted)
        self.leaked, self.leaked_unknown = None, False
        if isinstance(cleanup, CleanupStarted) and self.exit.source == "child_exit":  # the root's exit ended it
            self.leaked = cleanup.members_before or None
            self.leaked_unknown = cleanup.read_error is True  # its 0 then no count (``job_lines``)
        evidence = first.get(LimitEvidence)  # whether the pids cap refused a fork, as the worker's line read it
        self.processes = evidence.processes if isinstance(evidence, LimitEvidence) else None

    def capture(self, stream: str) -> Captured | None:
        captured = self.captured
        return Captured.read(getattr(captured, stream)) if isinstance(captured, OutputCaptured) else None


def line_from_stream(job: Job, out: str, label: str, ooms: dict[str, int] | None = None) -> JobLine | None:
    """``job``'s line as its streams in ``out`` say it; None when no attempt of it ended in the
    batch ``label``. A job whose earlier attempts ended but whose last did not is ``task_failed``
    with those attempts. ``ooms``: the OOM kill counts its task recorded, by run id."""
    directory = os.path.join(out, job.id)
    earlier: list[EarlierAttempt] = []
    while (attempt := _read(os.path.join(directory, attempt_dir(len(earlier) + 1), STREAM), label)) is not None:
        number = len(earlier) + 1
        earlier.append(
            EarlierAttempt(
                number,
                attempt_dir(number),
                attempt.run_id,
                attempt.started_at,
                attempt.exit.code,
                attempt.exit.source or "unknown",
                attempt.duration_ms,
                None,
                attempt.signal,
            )
        )
    last = _read(os.path.join(directory, STREAM), label)
    if last is None:
        return not_started(job, len(earlier), "task_failed", earlier) if earlier else None
    line = for_job(
        job,
        len(earlier) + 1,
        last.exit.source or "unknown",
        run_id=last.run_id,
        started_at=last.started_at,
        exit_code=last.exit.code,
        child_code=last.exit.child_code,
        duration_ms=last.duration_ms,
        resources=last.resources,
        stdout=last.capture("stdout"),
        stderr=last.capture("stderr"),
        earlier=earlier,
    )
    line.leaked, line.leaked_unknown = last.leaked, last.leaked_unknown
    line.signal = last.signal
    line.pids_cap_refused = pids_refused(job, last.processes)
    line.oom_kills = (ooms or {}).get(last.run_id) if last.run_id is not None else None
    return line


def lines_read_back(jobs: list[Job], out: str, label: str, otherwise) -> tuple[list[JobLine], int]:
    """The jobs' lines, each read back from its stream (``line_from_stream``) or, for one whose
    stream did not end in the batch ``label``, ``otherwise(job)``; and how many were read back. A
    task that cannot give its lines as its run made them (it failed as a whole, or it ran again
    after its batch halted) says the jobs that ended as they ended."""
    ooms = oom_kills(out, label, jobs)
    read = [line_from_stream(job, out, label, ooms) for job in jobs]
    lines = [otherwise(job) if line is None else line for job, line in zip(jobs, read)]
    return lines, sum(line is not None for line in read)


def task_failed(jobs: list[Job], out: str, label: str, reason: str) -> tuple[list[JobLine], int]:
    """The lines of a Dask task that failed as a whole (``reason``, on each line too: the page and
    the JUnit are read where the warning is not): a job whose stream (on the shared ``--out``)
    ended in this batch gets the line read back, the others ``task_failed``; and how many were
    read back."""
    why = f"its Dask task failed: {reason}"
    return lines_read_back(jobs, out, label, lambda job: not_started(job, 0, "task_failed", message=why))


def not_back(jobs: list[Job], out: str, label: str, why: str, unstarted) -> list[JobLine]:
    """The lines of a Dask task's run that never came back (still out when a stop's wait was over;
    or an earlier run of a task Dask ran again once the batch stopped or halted, which starts
    none of its jobs): a job whose stream ended in this batch read back; one its task's record says
    began (``began``) ``task_failed`` with ``why`` (it ran, and may run on); the others
    ``unstarted(job)``, never started."""
    begun = set(earlier(out, label, jobs))
    lines, _ = lines_read_back(
        jobs,
        out,
        label,
        lambda job: not_started(job, 0, "task_failed", message=why) if job.id in begun else unstarted(job),
    )
    return lines


def failed_said(tasks: int, jobs: int, ended: int, reason: str) -> str:
    """The one line for ``tasks`` Dask tasks of ``jobs`` jobs that failed as a whole for
    ``reason``, ``ended`` of the jobs read back from their streams (``task_failed``)."""
    which = "it" if jobs == 1 else f"{ended} of them"
    lines_of = "its line is read from its stream" if ended == 1 else "their lines are read from their streams"
    read_back = f" ({which} had ended: {lines_of})" if ended else ""
    what = "a Dask task" if tasks == 1 else f"{tasks} Dask tasks"
    return f"{what} of {plural(jobs, 'job')} failed: {reason}{read_back}"


def _read(path: str, label: str) -> _Ended | None:
    """The attempt the stream at ``path`` holds, when it is this batch's and ended."""
    events = read_all(path)
    if not _ours(events, label) or not isinstance(events[-1], RunnerExit):
        return None
    return _Ended(events)


def _ours(events: list, label: str) -> bool:
    """The stream's ``run_started`` carries the batch's label."""
    if not events or not isinstance(events[0], RunStarted):
        return False
    labels = events[0].labels
    return isinstance(labels, dict) and labels.get(BATCH_LABEL) == label


def _between(start: str | None, end: str | None) -> float | None:
    """Milliseconds from one stream time to another."""
    if start is None or end is None:
        return None
    try:
        began, ended = (datetime.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end))
    except ValueError:
        return None
    return round((ended - began).total_seconds() * 1000, 3)
