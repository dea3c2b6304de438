"""Running a batch: its jobs as runs on one host, at most ``jobs`` at once, each a full run
(its own containment group, stream, capture, deadlines and publication), with its line
recorded (``recorder``) as each one ends.

The host's signal watch is the batch's: a stop signal ends every running job (each stream ends
with its cancellation, as ``run``'s would) and no job starts after it; the jobs not started are
recorded as such. ``halt_on_failure`` starts no job after the first failure and lets the running
ones finish; ``retries`` runs a failed job again, up to that many more times, after
``retry_delay``'s pause (in the job's slot). A stop or the halt that comes before a retry (in
its pause, or while it waits for a slot) means it never runs: the job's last attempt's line
stands, says so (``job_lines.retry_not_started``), and keeps its files where they are.
"""

from __future__ import annotations

import contextlib
import os
import time

from ..engine.endings import Outcome, cancelled_headline, faulted
from ..engine.waits import wait_until
from ..engine import stopfd
from ..engine.host import Host, RunGroup
from ..engine.stop_raise import before_watch, let_through
from .. import caller_fds, safepath
from ..fdlimit import runs_that_fit
from ..context import RunContext
from ..spec import carrier_cwd
from . import job_lines
from .attempt import job_steps
from .held import Spares
from ..summary_line import EarlierAttempt, JobLine
from .limits import (
    AS_MANY_AS_FIT,
    LEAK_TIMEOUT_SECONDS,
    MAX_JOBS_IN_FLIGHT,
    JobTimeout,
    MemoryBudget,
    Timeouts,
    usable_cpus,
)
from .graph import check, has_needs
from .inputs import digests
from .jobkeys import with_slot
from .piped import WAITED, until_readable
from .manifest import Job
from .schedule import Schedule
from .counts import JobCounts
from .recorder import Recorder
from .template_flags import reads_rest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Protocol

    from .ci import RetryDelay
    from .recorder import Jobs

    class LiveOutput(Protocol):
        """What ``run_batch`` asks of its ``output`` (the CLI's: ``cli.batch_output``)."""

        def attach(self, host: Host) -> None: ...

        def drain(self, host: Host) -> None: ...

        def close(self) -> None: ...


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
        "group_limits",
        "took",
        "retry_delay",
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
        group_limits: dict[str, int] | None = None,
        took: dict[str, float] | None = None,
        retry_delay: RetryDelay | None = None,
    ):
        self.out = out
        self.jobs = jobs if jobs is not None else usable_cpus()  # AS_MANY_AS_FIT: the open files decide
        self.retries = retries
        self.halt_on_failure = halt_on_failure
        self.resume = resume
        self.label = label or f"batch-{os.getpid()}-{time.time_ns()}"  # what `list` shows per job
        self.timeout = timeout  # --timeout: each job's, unless it gives its own
        self.memory_budget = memory_budget  # --memory-budget, in bytes
        self.peaks = peaks or {}  # --history's peak memory per job id (the budget's expectations)
        self.keep_failed_only = keep_failed_only  # --keep failed: a passing job's files are never written
        self.group_limits = group_limits or {}  # --group-limit NAME=N
        self.took = took  # --history's seconds per job id: the graph's longest paths start first
        self.retry_delay = retry_delay  # --retry-delay: the pause before a retried job's next attempt


def run_batch(
    jobs: Jobs,
    settings: Settings,
    on_recorded: Callable[[JobLine, JobCounts], None] | None = None,
    *,
    signals: bool = True,
    write_summary: bool = True,
    collect_lines: bool = True,
    stop_fd: int | None = None,
    on_tick: Callable[[dict[str, float], JobCounts], None] | None = None,
    output: LiveOutput | None = None,
    began: Callable[[Job], None] | None = None,
    halted: Callable[[], bool] | None = None,
    fresh_out: bool | None = None,
) -> tuple[list[JobLine], JobCounts]:
    """Run ``jobs`` (a ``manifest.Manifest``, read again as they start, or a list); returns
    their lines (finishing order; none without ``collect_lines``, so a long batch run from the
    CLI stays flat in memory) and the counts. A manifest that changed since it was checked stops
    the starts, and its setup Failure is raised once the jobs running have ended.

    ``signals``: the batch owns the process's stop signals (the CLI's batch, and the process the
    runner service starts for ``processkit.batch``); a Dask worker's chunk, on a thread of the
    worker's process, leaves its handlers alone. ``write_summary``: lines go to ``summary.jsonl`` as
    jobs end (a Dask worker returns them to the client, which writes them instead). ``stop_fd``:
    once it is readable (the name of a stop's source written to it) the batch stops as on a stop
    signal: how a Dask worker's chunk, which owns no signal, is stopped from another thread.
    ``on_tick``: called every second on the batch's loop with the jobs running (id -> the
    monotonic second each started) and the counts, so a progress bar moves between job ends.
    ``output``: the CLI's live output (``cli.batch_output``), written on the batch's loop while
    it turns, waited for at the end as long as its readers take something, never blocking it.
    ``began``: told of each job before its first attempt is spawned (a Dask chunk's ``began.Record``);
    ``halted``: asked before each start whether the batch halted elsewhere (a Dask client's
    ``--halt-on-failure``): then no job starts, and the running ones finish. ``fresh_out``:
    whether ``--out`` held nothing of an earlier batch, when the caller knows better than the
    recorder's look (a Dask chunk: the client's look, before its summary was there)."""
    graph = has_needs(jobs)  # asked once here: the recorder and the schedule are told
    if graph:
        check(list(jobs))  # an unknown need or a cycle: a usage error before anything is made
    at_once = runs_that_fit(settings.jobs or MAX_JOBS_IN_FLIGHT, say=settings.jobs != AS_MANY_AS_FIT)  # none: 111
    make = lambda: Recorder(  # noqa: E731
        settings.out, jobs, resume=settings.resume, halt_on_failure=settings.halt_on_failure, write=write_summary,
        collect=collect_lines, on_recorded=on_recorded, graph=graph,
    )  # fmt: skip
    # a stop while --out is readied (a --resume summary read: seconds for a large one) is the batch's stop
    recorder, blocked = before_watch(make, "its --out being set up") if signals else (make(), set())
    out = recorder.out
    earlier_files = not (recorder.fresh_out if fresh_out is None else fresh_out)  # the attempts to drop
    within = os.path.join(out, "")  # each job's directory is this and its id (``attempt.job_steps``)
    took = settings.took if graph else None  # --history's times order a graph's ready jobs
    whole = bool(settings.group_limits) or took is not None or graph
    attempts: dict[str, int] = {}  # the jobs started and not yet recorded: their attempts so far
    earlier: dict[str, list[EarlierAttempt]] = {}  # a retried job's earlier attempts, kept in attempt-N/
    waiting: dict[str, JobLine] = {}  # a failed attempt's line while its retry waits (its pause, a slot)
    paused: set[str] = set()  # the jobs in their --retry-delay pause now: the halt wakes them
    poll = None if halted is None else 1.0  # a halt told from elsewhere (Dask) wakes no pause: asked each second
    timeouts = Timeouts(settings.timeout)
    awaiting: list[object] = []  # the run that waits for the pipe's next line, while one does
    running: dict[str, float] = {}
    read_inputs: dict[str, dict[str, str] | None] = {}  # inputs' digests as each job started
    in_flight: dict[str, tuple[Job, object]] = {}  # job id -> the job and its attempt's steps
    with contextlib.ExitStack() as ending:
        ending.callback(recorder.close)  # the summary's lock let go however what follows fails
        ending.callback(let_through, blocked)  # first: put back by a failure before the watch too
        budget = None if settings.memory_budget is None else MemoryBudget(settings.memory_budget, jobs, settings.peaks)
        # After the budget's own pass over the jobs; read as they start unless a graph, groups or
        # --history's order need them all at once.
        schedule = Schedule(
            recorder.todo, at_once, settings.group_limits, took, whole=whole, read_rest=lambda: reads_rest(jobs)
        )
        own = _own_context()  # the batch's working directory, read once for all its runs
        spares = Spares(own.cwd)  # the memfds of --keep failed attempts that are over, for the next ones
        host = Host(watch=signals)  # last, before the try whose finally closes it (it may count itself unseen)

        def stopped() -> str | None:
            """Why no attempt starts now (a stop's headline, or the halt's words), or None."""
            if halted is not None and not recorder.halted and halted():
                recorder.halted = True
            if host.stop_source is not None:
                return cancelled_headline(host.stop_source)
            return job_lines.HALTED if recorder.halted else None

        def retry(job: Job, steps, delay_ms: int):
            """A retry's steps after its pause (a stop or the halt ends it), unless one of them came
            before it could start: then none ran (``finished`` records the last attempt's line)."""
            if delay_ms:
                paused.add(job.id)
                try:
                    yield from wait_until(lambda: stopped() is not None, host.loop.clock() + delay_ms / 1000, poll)
                finally:
                    paused.discard(job.id)
            if stopped() is not None:
                return job, None, None, False
            running[job.id] = time.monotonic()  # the attempt starts after its pause
            return (yield from steps)

        def next_run():
            if stopped() is not None:
                return None
            job = schedule.peek()
            if job is None:
                if schedule.awaited is not None and not awaiting:  # carried beside the jobs until it came
                    awaiting.append(
                        until_readable(host, schedule.awaited, lambda: recorder.halted or host.stop_source is not None)
                    )
                    return awaiting[0]
                return None  # asked again as a job ends
            if budget is not None:
                if not budget.admits(job):
                    return None
                budget.started(job)
            slot = schedule.take(job)
            attempts[job.id] = attempts.get(job.id, 0) + 1
            delay = 0
            try:
                if began is not None and attempts[job.id] == 1:
                    began(job)
                if job.plan.inputs:
                    read_inputs[job.id] = digests(job)  # the content it runs with
                attempt = job_steps(
                    host,
                    job,
                    within,
                    settings.label,
                    attempts[job.id],
                    timeouts.limit_ms(),
                    spares if settings.keep_failed_only else None,
                    own,
                    earlier_files=earlier_files,
                    args=with_slot(job.args, job.plan, slot),
                )
                if attempts[job.id] > 1:
                    delay = 0 if settings.retry_delay is None else settings.retry_delay.before(attempts[job.id])
                    attempt = retry(job, attempt, delay)
            except Exception as exc:  # noqa: BLE001 - this job's bookkeeping: its attempt's failure, not the batch's
                attempt = _raises(exc)
            if not delay:  # its age counts from here, its inputs read; a retry's from its pause's end
                running[job.id] = time.monotonic()
            in_flight[job.id] = (job, attempt)
            return attempt

        def failed(exc: Exception, attempt: object) -> tuple[Job, Outcome, None, bool]:
            """An attempt that raised outside the runner's steps (its set-up before them, the
            batch's bookkeeping for it after): that attempt is the batch group's own failure, and
            ends as itself (the runner's ``internal``, worded as a run's fault, one line:
            ``endings.faulted``) as ``finished`` records it; the batch's other jobs go on, stopped
            only by ``--halt-on-failure``'s rule or a stop. (The runner's steps end their own run
            when a step of theirs raises.)"""
            if awaiting and attempt is awaiting[0]:
                raise exc  # the wait for the batch's own input (a template's pipe): the batch's failure
            job = next(job for job, steps in in_flight.values() if steps is attempt)
            return job, faulted(exc), None, False

        def finished(result) -> None:
            if result is WAITED:
                awaiting.clear()
                return
            job, outcome, run_id, dropped = result
            running.pop(job.id, None)
            in_flight.pop(job.id, None)
            last = waiting.pop(job.id, None)  # the attempt before this one, when this is a retry
            inputs = read_inputs.pop(job.id, None)
            if outcome is None:  # a stop or the halt came before this retry: the last attempt stands
                assert last is not None, "only a retry is not run"
                line = job_lines.retry_not_started(last, stopped() or job_lines.HALTED)
            else:
                if last is not None:  # it ran: the last attempt's files were moved into attempt-N/
                    earlier.setdefault(job.id, []).append(last.attempt_record())
                line = job_lines.ran(job, run_id, attempts[job.id], outcome, outcome.remembered, earlier.get(job.id))
                line.inputs_sha256 = inputs
                if dropped:
                    line.drop_paths()
                timeouts.ended(line)
            if budget is not None:
                budget.ended(job, line)
            if outcome is not None and job_lines.retried(line) and attempts[job.id] <= settings.retries:
                why = stopped()
                if why is None:
                    waiting[job.id] = line
                    schedule.again(job)  # next
                    return
                job_lines.retry_not_started(line, why)
            retried = earlier.pop(job.id, None)
            line.flaky = line.exit_code == 0 and bool(retried)  # failed, then passed
            attempts.pop(job.id, None)
            recorder.record(line)
            for below, need, how in schedule.ended(job, line):
                recorder.record(job_lines.skipped(below, need, how))
            if recorder.halted:  # each wait woken: no job starts now
                for steps in awaiting[:1] + [in_flight[held][1] for held in paused]:
                    host.stop_carried(steps, "halted")

        pinned = False
        caller_gone = [False]
        try:
            try:
                safepath.pin(out)  # each job's five files are made under it: walked from there, not from /
                pinned = True
            except OSError:
                pass  # gone or changed since the recorder made it: each job's walk from / says so
            host.watch_signals()
            let_through(blocked)  # a stop held since the recorder was made reaches the host's handlers
            if stop_fd is not None:
                caller_gone = stopfd.watch(host, stop_fd)
            host.lodge(settings.label)  # the jobs' sockets, records and tombstones in one directory
            if output is not None:
                output.attach(host)
            if on_tick is not None:
                _every_second(host, lambda: on_tick(running, recorder.counts))
            host.supervise([RunGroup(next_run, finished, at_once, failed=failed)])
            if output is not None:
                output.drain(host)
        finally:
            if output is not None:
                output.close()
            recorder.counts.cancelled_by = CALLER_GONE if caller_gone[0] else host.stop_source
            try:
                stops = host.stops  # one more cuts the recording short
                why = stopped() or job_lines.HALTED  # what kept a queued retry from starting
                recorder.record_left(schedule.left(), lambda: host.stopped_since(stops), waiting, why)
                recorder.counts.unrecorded |= schedule.unread  # a read past the stop that failed
                recorder.say_left(lambda: host.stopped_since(stops))  # before the watch ends: a stop cuts it short
            finally:  # the summary failing on those lines (a full disk): the batch's state still goes
                host.close()
                spares.close()
                if pinned:
                    safepath.unpin(out)
    if schedule.failure is not None:
        raise schedule.failure
    return recorder.lines, recorder.counts


# What the batch's tally says stopped it once its stop descriptor's end of file came (its writer
# gone: the API's caller killed; ``engine.stopfd``); each job's stream says
# ``engine.signals.CALLER_GONE_SOURCE``, all the events schema allows.
CALLER_GONE = "caller_gone"


def _every_second(host: Host, call: Callable[[], None]) -> None:
    """``call`` now, then once a second on ``host``'s loop while it turns (its close drops the
    timer)."""

    def tick() -> None:
        call()
        host.loop.call_later(1.0, tick)

    tick()


def _own_context() -> RunContext:
    """The context of the batch's runs: its working directory read once here (``carrier_cwd``),
    the caller's descriptors kept by each job, as GNU parallel's are (``caller_fds``), each job's
    stream in the ``--out`` the batch holds (``stream_guarded``), nextest's leak bound
    (``LEAK_TIMEOUT_SECONDS``)."""
    return RunContext(
        cwd=carrier_cwd(), passed_fds=caller_fds.taken(), stream_guarded=True, exit_drain_seconds=LEAK_TIMEOUT_SECONDS
    )


def _raises(exc: Exception):
    """An attempt that is only ``exc``, raised at its first step: the bookkeeping a job's start
    needs (its inputs' digests, its slot) that broke ends that job alone, as the batch group's
    own failure (``failed``), where raised from ``next_run`` it would be the host's."""
    raise exc
    yield  # a generator of waits, as every attempt is
