"""A finished job's summary line, from its own stream: what ``summary.jsonl`` holds per job.

The stream's lines it reads (``SUMMARY_EVENTS``) are the ones the run kept as it wrote them
(``steps``' ``keep``), so the file is not read back."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

from ..bounded import SUMMARY, InputError, lines, loads, open_input
from ..errors import Failure, Kind
from ..events.argv import fingerprint

SUMMARY_EVENTS = ("runner_exit", "resource_summary", "output_captured")


def written_objects(outcome) -> list[dict]:
    """The summary's events from the lines the run wrote (``Outcome.written``)."""
    return [json.loads(line) for line in outcome.written.values()]


def read_objects(path: str) -> Iterator[dict]:
    """The JSON objects of a JSONL file, one a line, read within ``bounded.SUMMARY`` (a bound hit,
    or a summary that is no regular file, is a setup Failure); a line that is not a JSON object,
    nested too deeply included, is skipped, and a file that cannot be read has none."""
    try:
        handle = os.fdopen(open_input(path, SUMMARY), "rb")
    except OSError:
        return
    except InputError as exc:
        raise Failure(Kind.SETUP, f"cannot --resume: {exc}") from None
    with handle:
        try:
            for _, line in lines(handle, path, SUMMARY):
                try:
                    value = loads(line.decode("utf-8"))
                except ValueError:  # UnicodeDecodeError too
                    continue
                if isinstance(value, dict):
                    yield value
        except InputError as exc:
            raise Failure(Kind.SETUP, f"cannot --resume: {exc}") from None
        except OSError:
            return


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
        # The runner's own words when it, not the child, decided the end (a setup or spawn
        # failure, a timeout): what ``run`` would have printed on stderr, and no stream holds.
        "message": outcome.failure.message if outcome.failure else None,
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
        "message": None,
    }


def finished_ids(path: str) -> set[str]:
    """For ``--resume``: the jobs whose last line in an earlier summary says exit 0."""
    last = {entry["id"]: entry.get("exit_code") for entry in read_objects(path) if isinstance(entry.get("id"), str)}
    return {job_id for job_id, code in last.items() if code == 0}
