"""``--dask-scheduler``: a batch's jobs sent to a Dask cluster, several jobs per task.

Each task runs its jobs with this same batch engine, in the worker's process (no signal handlers
touched: a worker runs tasks off its main thread), into the batch's ``--out``, which must be a
file system every worker shares (docs/fleet.md). Workers return their summary lines; the client
writes ``summary.jsonl`` as each task comes back, and the index at the end, so both are complete.
``--halt-on-failure``: the chunk that records the first failure tells the batch halted
(``chunk.tell_halted``; the client does, for a task that failed as a whole), so the running
chunks start no other job and come back with the lines of those that ran, and the chunks not
begun come back at once, their jobs ``halted``. A task that fails as a whole (its worker died
past the scheduler's ``allowed-failures``, it could not use ``--out``, Dask cancelled it) gives each of its jobs whose stream ended in this batch the line read back from that
stream (``ended``), and the others a ``task_failed`` line, with a warning saying why: the other
tasks go on. A task Dask runs again (its worker lost or retired, its result lost) finds the
record its earlier run kept in ``--out`` of the jobs it began (``began``), and a warning names
those jobs (``began.say_rerun``).

A stop signal to the client stops the batch on every worker (``stop_chunks``, by ``client.run``):
the running chunks cancel their jobs as a stop signal would, the chunks not begun give theirs
``cancelled`` lines, and the client writes every line that comes back before it exits 107.
Dask itself cannot stop a task that runs, so the chunk's loop is told through a pipe. What runs
on the workers is ``chunk``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import os
import time

from . import began
from .chunk import (
    HALT_TOLD_S,
    forget_halt,
    forget_stop,
    named_under,
    run_chunk,
    tell_halted,
    tell_stopped,
    told,
    untold_said,
)
from .on_host import Settings
from .ended import failed_said, not_back, task_failed
from ..summary_line import JobLine
from .manifest import Job
from .counts import JobCounts
from .recorder import Recorder
from ..diagnostics import warn
from ..errors import Failure
from ..text import first_named, plural
from .dask_client import LOST, closing, connect, lost, no_worker_said, quiet, said
from .stop_signals import Stopping, catch_stop_signals
from ..engine.stop_raise import Stopped, before_watch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .recorder import Jobs

TASKS_PER_WORKER = 4  # small enough to spread the jobs, large enough to amortise a task
WIND_DOWN_S = 30  # after a stop, how long beyond the longest grace the client waits for lines
RETOLD_S = 1.0  # meanwhile, how often the workers are told the stop again (one started since never heard it)
NOT_BACK = "its Dask task did not come back"  # the client's words for a job whose task it stopped waiting for


def run_on_dask(
    address: str,
    jobs: Jobs,
    settings: Settings,
    on_recorded: Callable[[JobLine, JobCounts], None] | None = None,
) -> tuple[list[JobLine], JobCounts]:
    set_up = functools.partial(_set_up, address, jobs, settings, on_recorded)
    stop: list[str] = []
    # First: the set-up's own stop handling (``before_watch``) puts these back after it, not the
    # default, which once met a stop sent before the tasks were out (Dask's loop thread took it).
    restore, held = catch_stop_signals(stop)
    tasks: _Tasks | None = None  # None: the set-up's failure or stop is the batch's, no task was sent
    with contextlib.ExitStack() as closed:  # the summary's lock let go however what follows fails
        closed.callback(restore)  # last, for a set-up that failed
        try:
            try:
                with held():  # a stop from the set-up's end on (Stopped before), once every task is out
                    (client, recorder, todo), _ = before_watch(set_up, "its Dask tasks not sent yet", hold=False)
                    closed.enter_context(closing(client))
                    closed.enter_context(contextlib.closing(recorder))
                    closed.callback(_forget, client, recorder.out, settings, restore)  # first, before the closes
                    sent = worker_settings(settings, recorder.out)
                    tasks = _Tasks(client, recorder, settings.label, _chunks(client, todo), sent, recorder.out)
                tasks.take_all(held)
            except Stopping:
                if tasks is None:  # before the set-up's own handling was in
                    raise Stopped(stop[0], "its Dask tasks not sent yet") from None
                tasks.wind_down(stop[0], _grace_s(todo), held)
        except Failure:  # the summary cannot take a line (111), a stop's wind-down or not
            if tasks is not None:
                tasks.abandon(stop[0] if stop else "internal", _grace_s(todo), held)
            raise
        assert tasks is not None  # else raised above
        tasks.record_not_back()
        if stop or tasks.halting:
            tasks.forget()
    return recorder.lines, recorder.counts


def _forget(client, out: str, settings: Settings, restore) -> None:
    """The batch's marks on the cluster dropped, the client's handlers put back first."""
    restore()
    began.forget(out, settings.label)
    if settings.halt_on_failure and not lost(client):  # a scheduler lost has no halt to forget
        with quiet():
            forget_halt(client, settings.label, RETOLD_S)


def _set_up(address: str, jobs: Jobs, settings: Settings, on_recorded) -> tuple[object, Recorder, list[Job]]:
    """The client, its recorder (``--out`` made, ``--resume``'s skip decided; the client closed
    when it cannot be made) and the jobs to run (``--resume``'s warnings said). Under
    ``before_watch``: a stop meanwhile (a scheduler slow to answer, or one that takes the
    connection and never speaks, which Dask waits on past its connect timeout) is the batch's
    stop before any job; it once killed the client by its default (SIGTERM, SIGHUP), or ended it
    107 without a word (Ctrl-C)."""
    client = connect(address)  # before --out is made: an unreachable cluster leaves nothing
    recorder = None
    try:
        recorder = Recorder(
            settings.out, jobs, resume=settings.resume, halt_on_failure=settings.halt_on_failure,
            on_recorded=on_recorded,
        )  # fmt: skip
        return client, recorder, list(recorder.todo)  # cut into chunks, each sent whole: the Dask path holds its jobs
    except BaseException:
        if recorder is not None:
            recorder.close()  # the summary's lock let go
        client.close()
        raise


def worker_settings(settings: Settings, out: str) -> Settings:
    """What each chunk runs with: every setting the batch was given (a positional rebuild once
    dropped ``memory_budget``), but ``--out`` as the client resolved it (a relative one from the
    client's directory, not each worker's own: the lines still name their files under ``--out``
    as written, ``run_chunk``'s ``written_out``) and no ``--resume``: the client already decided
    which jobs run, and writes the summary itself."""
    chunk = copy.copy(settings)
    chunk.out = out if os.path.isabs(out) else os.path.join(os.getcwd(), out)
    chunk.resume = False
    return chunk


def _chunks(client, todo: list[Job]) -> list[list[Job]]:
    """The jobs cut into TASKS_PER_WORKER tasks per worker the scheduler knows now."""
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    size = max(1, -(-len(todo) // (workers * TASKS_PER_WORKER)))
    return [todo[start : start + size] for start in range(0, len(todo), size)]


def _grace_s(todo: list[Job]) -> float:
    """The longest grace of a job sent: how much longer than WIND_DOWN_S a stopped task may take."""
    return max((job.template.grace_ms or 0 for job in todo), default=0) / 1000


class _Tasks:
    """The batch's tasks on the cluster, and what becomes of each: recorded as it comes back,
    cancelled once the batch halts, waited for a bounded while after a stop."""

    def __init__(
        self, client, recorder: Recorder, label: str, pieces: list[list[Job]], settings: Settings, written: str
    ):
        self.client = client
        self.recorder = recorder
        self.label = label
        fresh = recorder.fresh_out  # the client's look at --out, before its own summary was there
        self.chunks = {client.submit(run_chunk, piece, settings, written, fresh, pure=False): piece for piece in pieces}
        self.opened = settings.out  # where the workers open --out: a stream read back names its files there
        self.futures = list(self.chunks)
        self.waiting = set(self.futures)
        self.wound_down = False  # a stop's wind-down began: the workers told, its wait under way or over
        self.halting = False  # --halt-on-failure halted the batch: the workers told (``tell_halted``)
        self.deadline: float | None = None  # a stop's one bound on the wait for the tasks (``wind_down``)
        self.cancelled: dict[str, list[int]] = {}  # why Dask cancelled tasks: how many, their jobs, those read back
        self.missed: set[str] = set()  # the workers a telling of the stop missed, each said once
        self.heard: set[str] = set()  # the workers that answered one
        self.untold: set[str] = set()  # those it may not have reached: missed the latest telling, or every one
        self.empty_asks = 0  # a stop's asks in a row that found the cluster with no worker (``_none_to_run``)

    def take(self, future, held) -> None:
        """A task come back: its lines recorded, then it leaves ``waiting``. A stop signal
        meanwhile is held until all are recorded (``catch_stop_signals``): raised inside,
        it would leave some of them neither recorded nor waited for. Its result in hand, its
        future is let go (before its lines are written, so the release is on its way before a
        line can be seen; a task failed as a whole, once its lines are read back): held, it kept
        the result wanted on its worker, and a worker lost later in the batch had Dask run the
        task again, its jobs a second time, for lines never taken. A task Dask cancelled (its
        client lost the scheduler, the cluster restarted) failed as a whole: the batch cancels
        none before it is over (``forget``)."""
        with held():
            try:
                self._record(future)
                del self.chunks[future]
            finally:  # taken once, even when its lines met the summary's failure
                self.waiting.discard(future)

    def _record(self, future) -> None:
        recorder = self.recorder
        try:
            if future.cancelled() and lost(self.client):  # nothing to ask: said on its lines as a failed task's
                raise ConnectionError(LOST)
            lines, again = future.result()
        except Exception as exc:  # the task as a whole: its worker lost, its --out, Dask cancelled it
            jobs, reason = self.chunks[future], said(exc)
            lines, ended = task_failed(jobs, recorder.out, self.label, reason)
            again = []
            named_under(lines, self.opened, recorder.out)
            if future.cancelled():  # said once for every task cancelled so (``record_not_back``)
                counts = self.cancelled.setdefault(reason, [0, 0, 0])
                counts[:] = [count + more for count, more in zip(counts, (1, len(jobs), ended))]
            else:
                warn(failed_said(1, len(jobs), ended, reason))
        future.release()  # its lines in hand: let go before they are written (``take``)
        began.say_rerun(again)
        halted = recorder.halted
        failure = None
        for line in lines:
            try:
                recorder.record(line)
            except Failure as exc:  # said once, after the task's other lines are shown
                failure = exc
        if recorder.halted and not halted:  # the first failure: no other job starts
            self._halt()
        if failure is not None:
            raise failure

    def _halt(self) -> None:
        """Every worker told the batch halted (again, when the failing chunk told them itself: a
        task that failed as a whole could not). Not a cancel: Dask cannot stop a running task, and
        one cancelled went on unheard, its jobs that ran recorded as never started and its later
        ones started all the same; told, each running chunk comes back with its lines. Bounded
        (``chunk.told``): HALT_TOLD_S, or within a stop's wind-down a RETOLD_S of what is left of
        its one bound (the stop, told meanwhile, already ends the chunks); the workers that did not
        answer are named in one line."""
        self.halting = True
        if lost(self.client):  # no worker can be told: the tasks come back failed, said so
            return
        within = HALT_TOLD_S if self.deadline is None else max(0.0, min(RETOLD_S, self.deadline - time.monotonic()))
        try:
            with quiet():
                untold = tell_halted(self.client, self.label, within)
        except Exception as exc:  # noqa: BLE001 - a worker gone meanwhile: its tasks come back as they do
            warn(f"the Dask workers were not all told the batch halted: {said(exc, self.client)}")
            return
        if untold:
            warn(untold_said(untold, "the halt", within))

    def take_all(self, held) -> None:
        import distributed  # connect imported it, or said which extra provides it

        with no_worker_said(self.client, lambda: len(self.waiting)):
            for future in distributed.as_completed(self.futures):
                self.take(future, held)

    def wind_down(self, source: str, grace_s: float, held) -> None:
        """After a stop signal: every worker told, again each RETOLD_S (not as each task comes back)
        while the tasks still out are waited for a while: a worker process started since (a killed
        worker's replacement, where Dask runs its task again) never heard it. Each telling bounded
        (``tell_stopped``), else the stop was never told again; a scheduler gone meanwhile is said
        once (it failed the batch), Dask's own log of it kept quiet (``quiet``), and the tasks it
        failed are taken as they are (nothing told, nothing waited for but those still out)."""
        import distributed

        self.wound_down = True
        self.recorder.counts.cancelled_by = source
        self.deadline = deadline = time.monotonic() + WIND_DOWN_S + grace_s
        warned = False
        told_at = -RETOLD_S
        while True:
            if lost(self.client):  # none can be told: its tasks come back cancelled, each taken as failed
                for future in [future for future in self.waiting if future.done()]:
                    self.take(future, held)
                told_at = time.monotonic()  # the wait below for any still out, never a spin
            elif time.monotonic() - told_at >= RETOLD_S:  # a second since the last telling ended
                if self._none_to_run():  # no task comes back to a cluster with no worker: the wait would be its bound
                    warn(
                        f"the Dask cluster had no worker at two asks a second apart: the stop did not wait for the "
                        f"batch's {plural(len(self.waiting), 'task')} still out (a job a lost worker began may still run)"
                    )
                    return
                try:
                    with quiet():
                        untold = tell_stopped(self.client, self.label, source, RETOLD_S, self.heard)
                except Exception as exc:  # noqa: BLE001 - the scheduler gone: the tasks come back or not as they do
                    if not warned:
                        warn(f"the Dask workers were not all told to stop: {said(exc, self.client)}")
                    warned = True
                else:
                    self._say_untold(untold)
                told_at = time.monotonic()  # a telling a worker held for its whole bound leaves a wait
            if not self.waiting or deadline <= time.monotonic():
                break
            left = min(deadline, told_at + RETOLD_S) - time.monotonic()
            if left <= 0:
                continue
            try:
                with quiet():
                    done = distributed.wait(list(self.waiting), left, return_when="FIRST_COMPLETED").done
            except asyncio.TimeoutError:  # Dask's (the builtin TimeoutError only from Python 3.11)
                continue
            except distributed.CancelledError:  # one cancelled (its client lost the scheduler): taken as such
                done = {future for future in self.waiting if future.done()}
            for future in done:
                self.take(future, held)
            if not self.waiting:  # the last one back: no worker is told again
                break
        if self.waiting:
            warn(
                f"{len(self.waiting)} Dask task(s) did not come back after the stop; their jobs are recorded as "
                "their streams say, or task failed where they began (they may run on), or cancelled"
            )

    def _none_to_run(self) -> bool:
        """The cluster found with no worker at two asks in a row, a telling apart (one empty ask may
        be a nanny's restart; a restart slower than that is taken for none, so a job its lost worker
        began may run on: the warning says so, as ``ended.not_back``'s lines do). A scheduler that
        cannot be asked answers False: the wait goes on as it would."""
        try:
            with quiet():
                workers = self.client.scheduler_info().get("workers")
        except Exception:  # noqa: BLE001 - the scheduler gone meanwhile: the tellings say it
            return False
        self.empty_asks = 0 if workers else self.empty_asks + 1
        return self.empty_asks >= 2

    def _say_untold(self, untold: list[str]) -> None:
        """The workers a telling of the stop did not reach (each RETOLD_S), each named once, in one
        line; those the stop may not have reached kept (``untold``: the latest telling's, and those
        that answered none, gone from the scheduler since), with which a job whose task does not
        come back is recorded. One that answered a later telling heard the stop: never named there."""
        new = [address for address in untold if address not in self.missed]
        self.missed.update(untold)
        self.untold = set(untold) | (self.missed - self.heard)
        if new:
            warn(untold_said(new, "the stop", RETOLD_S))

    def abandon(self, source: str, grace_s: float, held) -> None:
        """The batch failed (its summary cannot take a line): as on one host, the jobs still
        running end first, stopped as the runner's ``internal`` failure stops them (or by the
        stop ``source`` already under way), and are waited for a bounded while; the tasks not
        begun are cancelled. Best effort: the failure is what the batch answers with. A failure
        inside a stop's wind-down is not wound down again (its wait would be doubled)."""
        if self.wound_down:
            self.forget()
            return
        try:
            self.wind_down(source, grace_s, held)
        except Stopping:  # the user's stop signal, during that wait: it ends the wait
            warn("a stop signal ended the wait for the failed batch's Dask tasks; those still out are cancelled")
        except Exception as exc:  # noqa: BLE001 - a worker gone meanwhile: the failure still stands
            warn(f"the Dask workers were not all told to stop the failed batch: {said(exc, self.client)}")
        self.forget()

    def forget(self) -> None:
        """A stopped (or halted) batch over: its tasks not back cancelled, and the workers told to
        forget its stop only when none was out. Forgotten while one was out, the stop was not there
        for a task that began later or had not yet looked (its chunk asking the scheduler whether
        the batch halted): it ran its jobs for a batch that was over, which had recorded them
        cancelled. So a stop whose tasks were not all back stays on the workers (at most
        ``chunk.STOPS_KEPT``): nothing more is waited for, a wait the user ended stays ended. Best
        effort: a worker gone meanwhile keeps nothing, and the lines are all written."""
        out = [future for future in self.futures if not future.done()]
        if lost(self.client):  # nobody to tell: the scheduler's loss is said on the tasks it failed
            return
        try:
            with quiet():
                self.client.cancel(out)
                untold = [] if out else told(self.client, forget_stop, (self.label,), RETOLD_S)
        except Exception as exc:  # noqa: BLE001 - the batch's results stand without it
            untold = [said(exc, self.client)]
        if untold:
            warn(f"the Dask workers were not all told the stopped batch is over: {first_named(untold)}")

    def record_not_back(self) -> None:
        """Each reason Dask cancelled tasks for (the scheduler's loss, the cluster restarted) said
        in one line, for all the tasks it failed; the jobs of every task still out (a stop's wait
        over, or the batch failed) as ``ended.not_back`` says them, their lines saying the task
        did not come back and naming the workers the stop did not reach (their jobs may run on)."""
        for reason, (tasks, failed, ended) in self.cancelled.items():
            warn(failed_said(tasks, failed, ended, reason))
        why = NOT_BACK
        if self.untold:
            why += f" (the stop did not reach {plural(len(self.untold), 'Dask worker')}: {first_named(sorted(self.untold))})"
        recorder = self.recorder
        for jobs in self.chunks.values():
            lines = not_back(jobs, recorder.out, self.label, why, lambda job: recorder.unstarted(job, why))
            named_under(lines, self.opened, recorder.out)
            for line in lines:
                recorder.record(line)
