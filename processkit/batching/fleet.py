"""``--dask-scheduler``: a batch's jobs sent to a Dask cluster, several jobs per task.

Each task runs its jobs with this same batch engine, in the worker's process (no signal handlers
touched: a worker runs tasks off its main thread), into the batch's ``--out``, which must be a
file system every worker shares (docs/fleet.md). Workers return their summary lines; the client
writes ``summary.jsonl`` as each task comes back, and the index at the end, so both are complete.
``--halt-on-failure`` cancels the tasks not yet started once a failure comes back.
"""

from __future__ import annotations

import os

from . import summary
from .carrier import Settings, Tally, open_summary, prepare, run_batch
from .manifest import Job
from ..jsontext import dumps

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

    out, summary_path, todo, tally = prepare(jobs, settings)
    lines: list[dict] = []
    summary_fd = open_summary(summary_path, settings.resume)
    with distributed.Client(address) as client:
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
                for line in future.result():
                    tally.count(line)
                    lines.append(line)
                    os.write(summary_fd, dumps(line).encode() + b"\n")
                    if on_finished is not None:
                        on_finished(line, tally)
                    if settings.halt_on_failure and line["exit_code"] not in (0, None) and not halted:
                        halted = True
                        client.cancel([f for f in futures if not f.done()])
            for future in futures:
                if future.cancelled():
                    for job in chunks[future]:
                        line = summary.not_started_line(job.id, job.args, 0, "halted")
                        tally.count(line)
                        lines.append(line)
                        os.write(summary_fd, dumps(line).encode() + b"\n")
        finally:
            os.close(summary_fd)
    return lines, tally
