"""A finished job's summary line, from its own stream: what ``summary.jsonl`` holds per job."""

from __future__ import annotations

import json

from ..events.argv import fingerprint


def read_events(path: str) -> list[dict]:
    """The complete events of a job's stream (a line that is not one is skipped)."""
    events = []
    try:
        with open(path, "rb") as handle:
            for line in handle:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    events.append(event)
    except OSError:
        pass
    return events


def summary_line(job_id: str, run_id: str | None, args: list[str], attempts: int, outcome, events: list[dict]) -> dict:
    """One job's line: its exit, what the runner measured and the digests of its capture."""
    last = {event.get("event"): event for event in events}
    exit_event = last.get("runner_exit", {})
    resources = dict(last.get("resource_summary", {}))
    for key in ("schema_version", "time", "event"):
        resources.pop(key, None)
    captured = last.get("output_captured", {})
    duration = None
    if outcome.started_ns is not None and outcome.ended_ns is not None:
        duration = round((outcome.ended_ns - outcome.started_ns) / 1e6, 3)
    return {
        "id": job_id,
        "run_id": run_id,
        "args_sha256": fingerprint(args),
        "exit_code": outcome.code,
        "source": exit_event.get("source", outcome.failure.kind.label if outcome.failure else "child_exit"),
        "child_code": exit_event.get("child_code"),
        "duration_ms": duration,
        "attempts": attempts,
        "resources": resources or None,
        "capture": {name: captured.get(name) for name in ("stdout", "stderr")},
    }


def not_started_line(job_id: str, args: list[str], attempts: int, reason: str) -> dict:
    """The line of a job the batch never started (cancelled or halted before its turn)."""
    return {
        "id": job_id,
        "run_id": None,
        "args_sha256": fingerprint(args),
        "exit_code": None,
        "source": reason,
        "child_code": None,
        "duration_ms": None,
        "attempts": attempts,
        "resources": None,
        "capture": {"stdout": None, "stderr": None},
    }


def finished_ids(path: str) -> set[str]:
    """For ``--resume``: the jobs whose last line in an earlier summary says exit 0."""
    last: dict[str, object] = {}
    try:
        with open(path, "rb") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                    last[entry["id"]] = entry.get("exit_code")
    except FileNotFoundError:
        pass
    return {job_id for job_id, code in last.items() if code == 0}
