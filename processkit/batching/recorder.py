"""Where every job's line goes, whichever way the batch ran it (``on_host.run_batch`` on this
host, ``fleet.run_on_dask`` on a cluster's workers): counted, appended to ``summary.jsonl``,
collected for the caller, handed to the terminal; and the rules both ways share: which jobs
``--resume`` skips, when ``--halt-on-failure`` halts, and the line of every job never started.
"""

from __future__ import annotations

import contextlib
import errno
import os

from ..bounded import SUMMARY, InputError, file_kind, lines, loads, open_input
from ..diagnostics import warn
from ..errors import Failure, Kind
from ..summary_line import SUMMARY_FILE, JobLine
from ..text import first_named, plural
from ..writeall import write_all
from .graph import with_dependents
from .inputs import changed
from .counts import JobCounts
from .job_lines import not_started, retry_not_started
from .outdir import left_as_they_were, lock_out, prepare_out
from .piped import Awaited
from .template_flags import input_left
from .unique import Names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Iterator
    from typing import Callable

    from .manifest import Job

    # A batch's jobs: a list, or a ``manifest.Manifest`` (its length known, read again from its
    # start on each iteration).
    Jobs = Collection[Job]


class Recorder:
    """The one place a job's line is recorded, for the batch into ``out`` (made or checked
    here; ``--resume`` and ``--halt-on-failure`` as given). ``write``: append each line to the summary as
    it comes (not in a Dask worker, whose lines the client writes); ``collect``: keep them for
    the caller (not the CLI, so a long batch stays flat in memory); ``on_recorded`` gets each
    with the counts so far; ``graph``: some job has ``needs`` (the caller asked ``has_needs``
    once), so ``--resume`` runs a rerun job's dependents too. ``todo``: the jobs to run, read from ``jobs`` as they are taken
    (``--resume``'s skipped ones are counted then)."""

    def __init__(
        self,
        out: str,
        jobs: Jobs,
        *,
        resume: bool = False,
        halt_on_failure: bool = False,
        write: bool = True,
        collect: bool = True,
        on_recorded: Callable[[JobLine, JobCounts], None] | None = None,
        graph: bool = False,
    ):
        self.fresh_out = prepare_out(out)  # empty: no job of an earlier batch left files there
        self.out = out
        self.summary_path = os.path.join(self.out, SUMMARY_FILE)
        self._jobs = jobs
        self.counts = JobCounts(len(jobs))
        self._graph = graph
        self._fd: int | None = None
        self._lock: int | None = None  # out's lock file, held for the batch's life (``lock_out``)
        self._end = 0  # where the summary's whole lines end: a failed write's torn part is cut back to it
        if write:  # held before --resume reads it: another batch's lines are never read half-written
            self._lock = lock_out(out)
            try:
                self._fd, self._end = _open_summary(self.summary_path, resume)
            except BaseException:
                self._let_go()
                raise
        # an --out an earlier batch wrote into (not resumed): the ids of the jobs this batch started,
        # in a filter of fixed size, so the job directories it did not write are said (``say_left``)
        self._started = None if self.fresh_out or resume or self._fd is None else Names()
        self._earlier: set[str] = set()  # --resume: the earlier summary's ids this batch has not met yet
        self._met_all = False  # --resume: the job list read to its end (every job met)
        self.halted = False  # before the first close: a summary --resume cannot read closes at once
        try:
            self.todo: Iterable[Job] = self._to_run(jobs, *finished_jobs(self.summary_path)) if resume else jobs
        except BaseException:  # a summary --resume cannot read: its lock let go, as no caller can close
            self.close()
            raise
        self.lines: list[JobLine] = []
        self._halt_on_failure = halt_on_failure
        self._collect = collect
        self._on_recorded = on_recorded

    def record(self, line: JobLine) -> None:
        """A job's last line: counted, written, kept, handed on; a failure halts the batch
        under ``--halt-on-failure`` (``halted``: start no other job)."""
        self.counts.count(line)
        self._earlier.discard(line.id)
        if self.counts.own is not None:
            self.counts.own.add(line.id)
        if self._started is not None and (line.attempts or line.source == "task_failed"):
            self._started.noted("id", line.id)  # its directory this batch's (a failed task's may be begun)
        if self._halt_on_failure and line.failed:
            self.halted = True
        if self._collect:
            self.lines.append(line)
        failure = None if self._fd is None else self._write(self._fd, line.encode())
        if self._on_recorded is not None:
            self._on_recorded(line, self.counts)  # the failing job's own line is shown too
        if failure is not None:
            raise failure

    def _write(self, fd: int, data: bytes) -> Failure | None:
        """A line into the summary, or the failure that stops the batch as a setup failure
        (111), naming the file and why (a full disk): the summary is what the batch answers
        with. The failure is said once: the summary is closed, so the lines recorded after it
        (the unstarted jobs' as the batch ends) are not written, and the batch's own clean-up
        is not cut short by the same failure again."""
        try:
            write_all(fd, data)
        except OSError as exc:
            self._fd = None
            with contextlib.suppress(OSError):  # its torn part gone, so a --resume appends to whole lines
                os.ftruncate(fd, self._end)
            os.close(fd)
            return Failure(Kind.SETUP, f"cannot write {self.summary_path}: {exc.strerror or exc}; the batch stops")
        self._end += len(data)
        return None

    def record_not_started(self, job: Job) -> None:
        """The line of a job left unstarted by a stop (``cancelled``) or by the halt (``halted``)."""
        self.record(self.unstarted(job))

    def unstarted(self, job: Job, message: str | None = None) -> JobLine:
        """``record_not_started``'s line, ``message`` saying more where there is more to say (a
        Dask task that did not come back)."""
        return not_started(job, 0, "cancelled" if self.counts.cancelled_by else "halted", message=message)

    def record_left(
        self, left: Iterable[Job], stopped_again: Callable[[], bool], waiting: dict[str, JobLine], why: str
    ) -> None:
        """Each job never started (``left``), recorded so, or a retried one by its last attempt's
        line (``waiting``: ``why`` its retry was not started); a stop that comes meanwhile (a second
        Ctrl-C: ``stopped_again``, asked before each) cuts that short, and the closing line then
        says the rest not recorded, the first stop's outcome standing."""
        for job in left:
            if stopped_again():
                self.counts.unrecorded = True
                return
            last = waiting.pop(job.id, None)
            if last is None:
                self.record_not_started(job)
            else:
                self.record(retry_not_started(last, why))

    def close(self) -> None:
        self.counts.total = len(self._jobs)  # a template's pipe: known only now (the jobs it gave)
        # a stop or the halt left a template's pipe unread (its producer may never end)
        stopped = self.halted or self.counts.cancelled_by is not None
        self.counts.input_left = stopped and input_left(self._jobs)
        # the job list read to its end (not so after a setup failure, a stop or the halt, whose
        # pipe's rest is never read) and the summary still taking lines: the earlier ids left are
        # no job of this batch
        if self._earlier and self._met_all and self._fd is not None:
            self.counts.gone, self._earlier = frozenset(self._earlier), set()
            named = first_named(sorted(self.counts.gone))
            warn(
                f"{self.summary_path} keeps the lines of {plural(len(self.counts.gone), 'job')} an earlier batch "
                f"ran that this one does not have ({named}): the page and the reports leave them out"
            )
        self.say_left(lambda: False)
        if self._fd is not None:
            os.close(self._fd)
        self._let_go()

    def _let_go(self) -> None:
        """``out`` free for another batch."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
            self._fd = None

    def say_left(self, stopping: Callable[[], bool]) -> None:
        """Once, as the batch ends: the job directories an earlier batch wrote into ``out`` and this
        one did not (a job it does not have, or never started), named: the summary, page and
        reports this batch writes leave them out, and what they hold is not its jobs' (a stale
        failure, say). A stop meanwhile (``stopping``) cuts the listing short: the count is then
        of those listed so far."""
        if self._started is None or self._fd is None:
            return
        count, first, cut = left_as_they_were(self.out, self._started, stopping)
        self._started = None
        if count:
            many = ("at least " if cut else "") + plural(count, "job directory", "job directories")
            warn(
                f"{self.out} holds {many} an earlier batch wrote that this one did not "
                f"({first_named(first, count)}): {'its' if count == 1 and not cut else 'their'} files are not this batch's"
            )

    def _to_run(
        self, jobs: Jobs, done: dict[str, tuple[str | None, dict[str, str] | None]], earlier: set[str]
    ) -> Iterable[Job]:
        """``--resume``: the jobs an earlier summary does not show exited 0, those whose job
        (command, environment, directory: its digest) or ``inputs``' content changed since it
        did, with a warning, and the jobs that need one of those (``needs``); the others are
        counted as skipped. Read as they are taken, unless a graph needs them all at once.
        ``earlier``: every id the summary names, each let go of as this batch meets its job."""
        self._earlier = earlier
        self.counts.own = set() if earlier else None
        todo = (job for job in jobs if isinstance(job, Awaited) or self._again(job, done))
        if not self._graph:
            return self._to_the_end(todo)
        again = with_dependents(list(jobs), list(todo))
        self.counts.skipped = len(jobs) - len(again)  # a need run again runs its dependents too
        self._met_all = True
        return again

    def _to_the_end(self, todo: Iterable[Job]) -> Iterator[Job]:
        """``todo`` as it is taken, ``_met_all`` set once it is used up."""
        yield from todo
        self._met_all = True

    def _again(self, job: Job, done: dict[str, tuple[str | None, dict[str, str] | None]]) -> bool:
        self._earlier.discard(job.id)
        if job.id not in done:
            return True
        digest, inputs = done[job.id]
        if digest not in (None, job.digest):
            warn(f"{job.id}: the job changed since it exited 0 (job_sha256 {digest} is now {job.digest}): run again")
            return True
        if job.plan.inputs and (why := changed(job, inputs)) is not None:
            warn(f"{job.id}: {why} since it exited 0: run again")
            return True
        self.counts.skipped += 1
        return False


def finished_jobs(path: str) -> tuple[dict[str, tuple[str | None, dict[str, str] | None]], set[str]]:
    """The jobs whose last line in the summary at ``path`` says exit 0, with the digest of the
    job that did (None from a summary written before lines carried it) and its inputs' digests;
    and every job id the summary names."""
    last = {line.id: line for line in _read_lines(path)}
    done = {job_id: (line.job_sha256, line.inputs_sha256) for job_id, line in last.items() if line.exit_code == 0}
    return done, set(last)


def _read_lines(path: str) -> Iterator[JobLine]:
    """The job lines of the summary at ``path``, read within ``bounded.SUMMARY`` (a bound hit,
    or a summary that is no regular file, is a setup Failure); a line that is no job's object,
    nested too deeply included, is skipped, and a file that cannot be read has none."""
    try:
        handle = os.fdopen(open_input(path, SUMMARY), "rb")
    except OSError:
        return
    except InputError as exc:
        raise Failure(Kind.SETUP, f"cannot resume the batch: {exc}") from None
    with handle:
        try:
            for _, text in lines(handle, path, SUMMARY):
                try:
                    line = JobLine.read(loads(text.decode("utf-8")))
                except ValueError:  # UnicodeDecodeError too
                    continue
                if line is not None:
                    yield line
        except InputError as exc:
            raise Failure(Kind.SETUP, f"cannot resume the batch: {exc}") from None
        except OSError:
            return


def _open_summary(path: str, resume: bool) -> tuple[int, int]:
    """``summary.jsonl``, appended to on ``--resume``, else started afresh; never through a link;
    with its size. Opened once ``out`` is locked (``outdir.lock_out``), so emptied only then: a
    second batch into the same ``out`` (``--out``) would replace the first one's job files under
    its summary lines, so it is refused. On ``--resume`` a last line left torn (a crash, a write
    that failed) is ended first: the reader skips it as no job's line, and the next line starts
    whole after it."""
    flags = os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | os.O_RDWR, 0o644)
    except OSError as exc:
        why = "it is a symbolic link, and a link is never followed" if exc.errno == errno.ELOOP else exc.strerror
        raise Failure(Kind.SETUP, f"cannot write the summary {path}: {why}") from None
    kind = file_kind(os.fstat(fd).st_mode)  # a FIFO there: O_RDWR did not wait, nothing is written into it
    if kind is not None:
        os.close(fd)
        said = (
            f"cannot resume the batch: cannot read the batch summary {path}"
            if resume
            else f"cannot write the summary {path}"
        )
        raise Failure(Kind.SETUP, f"{said}: it is {kind}, not a regular file")
    try:
        if not resume:
            os.ftruncate(fd, 0)
        size = os.fstat(fd).st_size if resume else 0
        if size and os.pread(fd, 1, size - 1) != b"\n":
            size += os.write(fd, b"\n")
    except OSError as exc:
        os.close(fd)
        raise Failure(Kind.SETUP, f"cannot write the summary {path}: {exc.strerror}") from None
    return fd, size
