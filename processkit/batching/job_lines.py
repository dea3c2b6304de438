"""A job's line made as the job ends: from the events its run wrote and its Outcome, or for a
job that never started, the reason why (``summary_line`` is the line's type)."""

from __future__ import annotations

import re
import time

from ..events.argv import described
from ..events.emitter import utc_timestamp
from ..summary_line import Captured, EarlierAttempt, JobLine, Resources

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..engine.endings import Outcome
    from .manifest import Job

# The stream events a job's line is made from: the engine hands back the last one of each it
# wrote, so the stream is not read again. Not ``root_exited``: the signal a root died of is the
# Outcome's (``Outcome.signal``), so a held job's ``root_exited`` stays an event object, never
# made a record for a passing job whose stream is dropped. Nor ``resource_summary``: the line's
# figures are the whole tree's, the Outcome's ``usage``, where the stream keeps the reference's.
# ``limit_evidence`` (only a job with a ``max_processes``, as ``run`` remembers it: no other job
# builds and keeps that record): whether its cap refused a fork (``line_events``).
LINE_EVENTS = ("runner_exit", "output_captured")
_PIDS_CAPPED_EVENTS = (*LINE_EVENTS, "limit_evidence")

# How a job that did not exit 0 ended, as the batch counts and names it: (kind, the words the
# closing sentence and a job's terminal line use), in the sentence's order. A job that ran is
# ``failed`` unless its ``source`` is in ``RAN``; one that never ran (exit null) is
# ``not_started`` unless its ``source`` is in ``NEVER_RAN``. Another outcome is one more entry in
# these tables (and a count of that name in ``counts.JobCounts``), not another branch.
OUTCOMES = (
    ("failed", "failed"),
    ("timed_out", "timed out"),
    ("cancelled", "cancelled"),
    ("task_failed", "task failed"),
    ("not_started", "not started"),
    ("need_failed", "skipped (a need did not exit 0)"),
)
# by runner_exit's source: the batch's stop, or `cancel`/`kill --run-id` on the job (108, 109), a
# stop asked for, never retried (``retried``)
RAN = {"timeout": "timed_out", "cancelled": "cancelled", "control_cancel": "cancelled", "control_kill": "cancelled"}
# A Dask task lost its jobs' lines (they may have run); a need of the job did not exit 0.
NEVER_RAN = {"task_failed": "task_failed", "skipped": "need_failed"}
WORDS = dict(OUTCOMES)


def outcome(line: JobLine) -> str:
    """``line``'s kind: ``succeeded`` (exit 0) or one of ``OUTCOMES``."""
    code = line.exit_code
    if code == 0:
        return "succeeded"
    if code is None:
        return NEVER_RAN.get(line.source, "not_started")
    return RAN.get(line.source, "failed")


def retried(line: JobLine) -> bool:
    """Whether ``--retries`` gives ``line``'s job another attempt: it ran and failed, and no stop
    ended it (a retry would undo a ``cancel --run-id`` the caller asked for)."""
    return line.failed and outcome(line) != "cancelled"


HALTED = "halted by --halt-on-failure"  # why no job starts after the halt, as the closing line says it


def retry_not_started(line: JobLine, why: str) -> JobLine:
    """``line``, a failed attempt's, as the job's last: ``why`` (a stop's headline, or
    ``HALTED``) came before its retry (in ``--retry-delay``, or queued), which never ran. Its
    ``attempts`` count only those that ran, and its files stay where the job's are."""
    said = f"{why}: the retry (attempt {line.attempts + 1}) was not started"
    line.message = said if line.message is None else f"{line.message}; {said}"
    return line


def for_job(
    job: Job,
    attempts: int,
    source: str,
    *,
    run_id: str | None = None,
    started_at: str | None = None,
    exit_code: int | None = None,
    child_code: int | None = None,
    duration_ms: float | None = None,
    resources: Resources | None = None,
    stdout: Captured | None = None,
    stderr: Captured | None = None,
    message: str | None = None,
    earlier: list[EarlierAttempt] | None = None,
    skipped_for: str | None = None,
) -> JobLine:
    """``job``'s line: its identity (id, digests, command, needs) from the job, the rest as given.
    Every field is given in order, the record's quick way in (``plain``: a field given by name
    costs a merge with the defaults, a job's largest share of making its line)."""
    return JobLine(
        job.id,
        run_id,
        described(tuple(job.args))[1],  # its run_started's fingerprint, kept by events/argv.py for the same argv
        job.digest,
        None if job.secret else list(job.args),  # a ``secret`` job's argv: only its digest
        started_at,
        exit_code,
        source,
        child_code,
        duration_ms,
        attempts,
        resources,
        stdout,
        stderr,
        message,
        earlier or [],
        False,  # flaky: decided by the batch once the job is recorded
        skipped_for,
        list(job.plan.needs) or None,
        None,  # inputs_sha256: the batch's, as the job started
    )


def ran(
    job: Job,
    run_id: str | None,
    attempts: int,
    outcome: Outcome,
    events: dict[str, dict],
    earlier: list[EarlierAttempt] | None = None,
) -> JobLine:
    """The line of a job whose attempt ran to its end, from the ``LINE_EVENTS`` it wrote (by
    type; a run that failed before its stream opened wrote none) and its Outcome."""
    exit_event = events.get("runner_exit", {})
    captured = events.get("output_captured", {})
    failure = outcome.failure
    duration = None
    if outcome.started_ns is not None and outcome.ended_ns is not None:
        duration = round((outcome.ended_ns - outcome.started_ns) / 1e6, 3)
    line = for_job(
        job,
        attempts,
        exit_event.get("source", failure.kind.label if failure else "child_exit"),
        run_id=run_id,
        started_at=_started_at(outcome.started_ns),
        exit_code=outcome.code,
        child_code=exit_event.get("child_code"),
        duration_ms=duration,
        resources=Resources.written(outcome.usage.resource_summary() if outcome.usage is not None else None),
        stdout=Captured.written(captured.get("stdout")),
        stderr=Captured.written(captured.get("stderr")),
        message=_unsaid(job, failure.message) if failure else None,
        earlier=earlier,
    )
    if outcome.signal is not None and exit_event.get("source") == "child_exit":
        # The child's own death, not the runner's teardown; said where its stream says it, as
        # ``root_exited`` came before the ``runner_exit`` read here (a stream that failed writes
        # neither from then on).
        line.signal = outcome.signal
    if outcome.usage is not None and outcome.usage.oom_kills:
        line.oom_kills = outcome.usage.oom_kills
    line.pids_cap_refused = pids_refused(job, events.get("limit_evidence", {}).get("processes"))
    if outcome.left_behind:  # nextest's leak: its processes outlived its command, killed at its cleanup
        line.leaked = outcome.left_behind
    line.leaked_unknown = outcome.left_behind is None  # its members unread: no leak is no word of none
    return line


def line_events(job: Job) -> tuple[str, ...]:
    """The events ``job``'s attempt remembers for its line: ``LINE_EVENTS``, and ``limit_evidence``
    when it has a ``max_processes``."""
    return LINE_EVENTS if job.template.limits.max_processes is None else _PIDS_CAPPED_EVENTS


def pids_refused(job: Job, processes: str | None) -> int | None:
    """The job's ``max_processes`` when its ``limit_evidence`` says the pids cap ``tripped`` (its
    child's 'Cannot fork', said why); None otherwise. The worker's line and the line read back
    from the job's stream (``ended.line_from_stream``) both say it through here."""
    return job.template.limits.max_processes if processes == "tripped" else None


def _unsaid(job: Job, message: str) -> str:
    """``message`` without a ``secret`` job's program (a spawn failure names it, as the run's
    stream says it): its line, and so the page and the JUnit report, keep only the argv's digest.
    The program named is the one the run was given (``jobkeys.with_slot``): a ``{%}`` in it is
    its slot's number by then, so any number matches there."""
    if job.secret and job.args:
        from ..spawn_words import named

        pattern = re.escape(named(job.args[0]))
        if 0 in job.plan.slot_args:
            pattern = pattern.replace(re.escape("{%}"), r"\d+")
        return re.sub(pattern, "(a secret job's program)", message)
    return message


def not_started(
    job: Job, attempts: int, reason: str, earlier: list[EarlierAttempt] | None = None, message: str | None = None
) -> JobLine:
    """The line of a job the batch never started, ``reason`` saying why (``halted``,
    ``cancelled``, ``task_failed``, with ``message`` the task's failure). ``earlier`` comes only
    from a Dask task's read-back (``ended.line_from_stream``): a job whose attempts in
    ``attempt-N/`` ended but whose last did not (its task failed); a stop or the halt before a
    retry keeps the last attempt's own line instead (``retry_not_started``)."""
    return for_job(job, attempts, reason, earlier=earlier, message=message)


def skipped(job: Job, need: str, how: str) -> JobLine:
    """The line of a job never started because its ``need`` did not exit 0 (``how`` it ended:
    ``exit 1``, ``timed out``, ``cancelled``, ``skipped`` ...), as make -k leaves a target."""
    return for_job(job, 0, "skipped", message=f"its need {need} did not exit 0 ({how})", skipped_for=need)


def _started_at(started_ns: int | None) -> str | None:
    """When the job's child started, on the wall clock (``started_ns`` is the monotonic one)."""
    if started_ns is None:
        return None
    return utc_timestamp(time.time_ns() - (time.monotonic_ns() - started_ns), digits=6)
