"""``--dask-scheduler``: a batch's jobs sent to a Dask cluster, several jobs per task.

Each task runs its jobs with this same batch engine, in the worker's process (no signal handlers
touched: a worker runs tasks off its main thread), into the batch's ``--out``, which must be a
file system every worker shares (docs/fleet.md). Workers return their summary lines; the client
writes ``summary.jsonl`` as each task comes back, and the index at the end, so both are complete.
``--halt-on-failure`` cancels the tasks not yet started once a failure comes back. A task that
fails as a whole (its worker died, or could not use ``--out``) gives its jobs a ``task_failed``
line, with a warning saying why: the other tasks go on.
"""

from __future__ import annotations

import os

from . import summary
from .carrier import Settings, Tally, open_summary, prepare, run_batch
from .manifest import Job
from ..diagnostics import warn
from ..errors import Failure, Kind, usage
from ..jsontext import dumps
from ..text import sanitize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

TASKS_PER_WORKER = 4  # small enough to spread the jobs, large enough to amortise a task


def run_chunk(jobs: list[Job], settings: Settings) -> list[dict]:
    """A task: these jobs, on this worker, with the batch engine."""
    lines, _ = run_batch(jobs, settings, signals=False, write_summary=False)
    return lines


def run_on_dask(
    address: str, jobs: list[Job], settings: Settings, on_finished: Callable[[dict, Tally], None] | None = None
) -> tuple[list[dict], Tally]:
    import distributed

    client = connect(address)  # before --out is made: an unreachable cluster leaves nothing
    out, summary_path, todo, tally = prepare(jobs, settings)
    lines: list[dict] = []
    summary_fd = open_summary(summary_path, settings.resume)

    def record(line: dict) -> None:
        tally.count(line)
        lines.append(line)
        os.write(summary_fd, dumps(line).encode() + b"\n")
        if on_finished is not None:
            on_finished(line, tally)

    with client:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        size = max(1, -(-len(todo) // (workers * TASKS_PER_WORKER)))
        worker_settings = Settings(
            out, settings.jobs, settings.retries, settings.halt_on_failure, False, settings.label
        )
        futures = [
            client.submit(run_chunk, todo[start : start + size], worker_settings, pure=False)
            for start in range(0, len(todo), size)
        ]
        chunks = dict(zip(futures, (todo[start : start + size] for start in range(0, len(todo), size))))
        halted = False
        try:
            for future in distributed.as_completed(futures):
                if future.cancelled():
                    continue
                try:
                    finished = future.result()
                except Exception as exc:  # the task as a whole: its worker, or its --out
                    count = len(chunks[future])
                    warn(f"a Dask task of {count} job{'s' if count != 1 else ''} failed: {sanitize(_said(exc))}")
                    finished = [summary.not_started_line(job.id, job.args, 0, "task_failed") for job in chunks[future]]
                for line in finished:
                    record(line)
                    if settings.halt_on_failure and line["exit_code"] not in (0, None) and not halted:
                        halted = True
                        client.cancel([f for f in futures if not f.done()])
            for future in futures:
                if future.cancelled():
                    for job in chunks[future]:
                        record(summary.not_started_line(job.id, job.args, 0, "halted"))
        finally:
            os.close(summary_fd)
    return lines, tally


def connect(address: str):
    """A client of the scheduler at ``address``; a bad address is a usage error, an unreachable
    one a setup failure (Dask's own connect timeout bounds the wait)."""
    try:
        import distributed
    except ImportError:
        raise Failure(
            Kind.SETUP, "--dask-scheduler needs Dask's distributed package: pip install 'processkit[dask]'"
        ) from None
    try:
        return distributed.Client(address)
    except ValueError as exc:  # an address Dask cannot parse, or of a scheme it does not know
        raise usage(
            f"invalid value '{sanitize(address)}' for '--dask-scheduler <ADDRESS>': {sanitize(_said(exc))}"
        ) from None
    except (OSError, TimeoutError) as exc:
        raise Failure(
            Kind.SETUP, f"cannot reach the Dask scheduler at {sanitize(address)}: {sanitize(_said(exc))}"
        ) from None


def _said(exc: BaseException) -> str:
    """An exception's message on one line (a remote one may carry several)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
