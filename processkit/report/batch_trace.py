"""``batch --trace FILE``: the batch as Chrome's Trace Event JSON, which Perfetto and
``chrome://tracing`` open (as Bazel's ``--profile`` does for a build): one thread per slot, a
complete event (``"ph": "X"``) per attempt, from its start for its duration, with its outcome
and figures as arguments; a job that waited for others (``needs``) gets a flow arrow from each
need's end to its start (``"ph": "s"``/``"f"``), so the critical path reads off the lanes. Drawn
from the summary, as the page is (``batch_model``).
"""

from __future__ import annotations

import json

from .batch_model import Batch

PROCESS = 1


def trace_json(batch: Batch) -> str:
    jobs = {job.id: job for job in batch.jobs}
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": PROCESS, "args": {"name": f"batch {batch.out}"}}]
    events += [
        {"name": "thread_name", "ph": "M", "pid": PROCESS, "tid": lane + 1, "args": {"name": f"slot {lane + 1}"}}
        for lane in range(batch.lanes)
    ]
    for attempt in batch.attempts:
        job = jobs[attempt.job_id]
        final = attempt.number == job.attempts
        events.append(
            {
                "name": attempt.job_id,
                "cat": attempt.state,
                "ph": "X",
                "pid": PROCESS,
                "tid": attempt.lane + 1,
                "ts": round(attempt.start_ms * 1000, 3),
                "dur": round(attempt.duration_ms * 1000, 3),
                "args": {
                    "attempt": attempt.number,
                    "outcome": attempt.outcome,
                    "peak_memory_bytes": job.peak_memory if final else None,
                    "cpu_ms": job.cpu_ms if final else None,
                    **({"needs": job.needs} if job.needs else {}),
                    **({"flaky": True} if final and job.flaky else {}),
                },
            }
        )
    events += _waits(batch, jobs)
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, separators=(",", ":")) + "\n"


def _waits(batch: Batch, jobs: dict) -> list[dict]:
    """A flow arrow from each need's last attempt (just before its end, inside its slice) to the
    start of the job that waited for it."""
    found: list[dict] = []
    for job in batch.jobs:
        if not job.needs or not job.tries:
            continue
        started = job.tries[0]
        for need in job.needs:
            before = jobs.get(need)
            if before is None or not before.tries:
                continue  # skipped by --resume, or never ran
            last = before.tries[-1]
            end_us = round((last.start_ms + last.duration_ms) * 1000, 3)
            arrow = {"name": "needs", "cat": "needs", "id": len(found) // 2 + 1, "pid": PROCESS}
            found.append(
                {**arrow, "ph": "s", "tid": last.lane + 1, "ts": max(round(last.start_ms * 1000, 3), end_us - 1)}
            )
            found.append(
                {**arrow, "ph": "f", "bp": "e", "tid": started.lane + 1, "ts": round(started.start_ms * 1000, 3)}
            )
    return found
