"""``batch --trace FILE``: the batch as Chrome's Trace Event JSON, which Perfetto and
``chrome://tracing`` open (as Bazel's ``--profile`` does for a build): one thread per slot, a
complete event (``"ph": "X"``) per attempt, from its start for its duration, with its outcome
and figures as arguments. Drawn from the summary, as the page is (``batch_model``).
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
                },
            }
        )
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, separators=(",", ":")) + "\n"
