"""Which jobs a Dask task began, kept on the shared ``--out`` so that a run of the task Dask starts
again (its worker lost or retired, its result lost) can name the jobs its earlier run began
(``say_rerun``).

A job's stream cannot say it: under ``--keep failed`` a running job's stream is held in the
worker's memory, gone with the worker; and a worker lost between the job's spawn and its
``run_started`` leaves a stream without one, or none. So each task keeps one record,
``.dask-began/<the batch's label>/<its first job's id>`` (no job's directory: an id starts with a
letter or a digit; one directory per batch, so two batches sharing an ``--out`` keep apart),
whose first line is the batch's label and each later line the id of a job, written before that
job's first attempt is spawned (once: a run again marks only the ids not there yet). A job whose
line counts OOM kills has that count there too once it ended (``id oom_kills N run-id``: no id
holds a space), since no event holds it (``resourceSummary`` takes no new property) and a task
that fails as a whole reads its ended jobs' lines back from their streams (``ended``). Not synced:
a host lost before its page cache is written back can lose the last marks. The client removes
its batch's directory once the batch is over (``forget``).
"""

from __future__ import annotations

import errno
import os

from .. import bounded
from ..diagnostics import warn
from ..errors import Failure, Kind
from ..summary_line import JobLine
from ..text import first_named
from .manifest import Job
from .outdir import ensure_directory, prepare_out

DIRECTORY = ".dask-began"
_RECORD = bounded.Limits("Dask task's record", nofollow=True)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
OOM = " oom_kills "  # between a job's id and its line's count on the record
# A record's most bytes per job: its mark twice over (an id is at most 128 bytes, marked once by
# ``Record.mark``) and a count line (the id, OOM, 20 digits, a run id of at most 256 characters,
# 1,024 bytes in UTF-8: ``text.is_valid_run_id``) for each of as many as ``_RUNS`` runs of its
# task that ended it (each run again adds its own line, the last run's the one read back).
_COUNT_LINE = 129 + len(OOM) + 21 + 4 * 256 + 1
_RUNS = 16
_PER_JOB = 2 * 129 + _RUNS * _COUNT_LINE


def _batch_directory(out: str, label: str) -> str:
    return os.path.join(out, DIRECTORY, label)


def _lines(out: str, label: str, jobs: list[Job]) -> list[str]:
    """The lines of the record of the task of ``jobs`` in the batch ``label`` after its label; none
    when it is missing or another batch's."""
    head = label.encode() + b"\n"
    path = os.path.join(_batch_directory(out, label), jobs[0].id)
    most = len(head) + len(jobs) * _PER_JOB
    try:
        text = bounded.read_start(path, most + 1, _RECORD)
    except (OSError, bounded.InputError):
        return []
    if len(text) > most:  # the whole record read, or said: never a tail dropped without a word
        warn(f"{path} holds more than {most} bytes: its lines past them are not read (its task ran again too often)")
        text = text[: text.rfind(b"\n", 0, most) + 1]
    return text[len(head) :].decode(errors="replace").split("\n") if text.startswith(head) else []


def earlier(out: str, label: str, jobs: list[Job]) -> list[str]:
    """The ids of ``jobs`` an earlier run of their task began in the batch ``label``, in the order
    they began; none when the record is missing or another batch's."""
    ids = {job.id for job in jobs}
    return list(dict.fromkeys(name for name in _lines(out, label, jobs) if name in ids))


def oom_kills(out: str, label: str, jobs: list[Job]) -> dict[str, int]:
    """The OOM kill counts the task of ``jobs`` recorded for their lines (``Record.ended``), by
    the run id of the attempt each line is of."""
    ids, found = {job.id for job in jobs}, {}
    for line in _lines(out, label, jobs):
        name, cut, rest = line.partition(OOM)
        count, _, run_id = rest.partition(" ")
        if cut and name in ids and count.isdigit() and run_id:
            found[run_id] = int(count)
    return found


class Record:
    """This run's record of the jobs it begins (``mark``); appended to an earlier run's of this
    batch (``again``: the ids that one began, not marked twice), else begun afresh with the label."""

    def __init__(self, out: str, label: str, jobs: list[Job], again: list[str]) -> None:
        directory = _batch_directory(out, label)
        self.path = path = os.path.join(directory, jobs[0].id)
        self.marked = set(again)
        prepare_out(out)  # made where the worker sees it, as the chunk's run would make it
        self.fd: int | None = None
        try:
            ensure_directory(os.path.dirname(directory), "the Dask tasks' directory")
            ensure_directory(directory, "the Dask tasks' directory")
            self.fd = os.open(path, _WRITE_FLAGS | (0 if again else os.O_TRUNC), 0o644)
            if not again:
                os.write(self.fd, (label + "\n").encode())
        except OSError as exc:
            self.close()
            raise Failure(Kind.SETUP, f"cannot write {path}: {exc.strerror}") from None

    def mark(self, job: Job) -> None:
        """``job`` is about to begin: said before it is spawned, unless an earlier run said it. The
        record only serves the rerun's warning: a write that fails is said once, never the job's failure."""
        if job.id not in self.marked and self.fd is not None:
            self.marked.add(job.id)
            try:
                os.write(self.fd, (job.id + "\n").encode())
            except OSError as exc:
                warn(f"cannot write {self.path}: {exc.strerror}; a rerun of this Dask task may go unsaid")
                self.close()

    def ended(self, line: JobLine) -> None:
        """``line``'s OOM kill count, when it has one, kept for a read back of its stream."""
        if line.oom_kills and line.run_id is not None and self.fd is not None:
            try:
                os.write(self.fd, f"{line.id}{OOM}{line.oom_kills} {line.run_id}\n".encode())
            except OSError as exc:
                warn(f"cannot write {self.path}: {exc.strerror}; a job's OOM kills may go unsaid if its task fails")
                self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def forget(out: str, label: str) -> None:
    """The batch ``label`` is over: its tasks' records go, and ``.dask-began`` with them when no
    other batch's is there (a failure is a warning: the lines stand)."""
    directory = _batch_directory(out, label)
    try:
        fd = os.open(directory, _LIST_FLAGS)
    except FileNotFoundError:
        return
    except OSError as exc:
        warn(f"cannot remove {directory}: {exc.strerror}")
        return
    try:
        for name in os.listdir(fd):
            os.unlink(name, dir_fd=fd)
        os.rmdir(directory)
    except OSError as exc:
        warn(f"cannot remove {directory}: {exc.strerror}")
        return
    finally:
        os.close(fd)
    try:
        os.rmdir(os.path.dirname(directory))
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
            warn(f"cannot remove {os.path.dirname(directory)}: {exc.strerror}")


def say_rerun(again: list[str]) -> None:
    """Jobs whose task found an earlier run of theirs in this batch begun (``began.earlier``): Dask
    ran the task again (its worker lost, retired or scaled down, or its result lost before it
    came back), so they may have run twice, their lines showing the last run: said, since a job
    that is not safe to repeat (a deploy, a migration) needs to know."""
    if again:
        ids = first_named(again)
        warn(
            f"Dask ran a task again (its worker lost or retired, or its result lost) after {len(again)} of its "
            f"jobs had begun ({ids}): "
            + (
                "it may have run more than once, and its line is the last run's"
                if len(again) == 1
                else "they may have run more than once, and their lines are the last run's"
            )
        )
