"""A finished job's summary line, from its own stream: what ``summary.jsonl`` holds per job.

The stream's lines it reads (``SUMMARY_EVENTS``) are the ones the run kept as it wrote them
(``steps``' ``keep``), so the file is not read back."""

from __future__ import annotations

import json
import time
import os
from collections.abc import Iterator

from ..bounded import SUMMARY, InputError, lines, loads, open_input
from ..errors import Failure, Kind
from ..events.argv import fingerprint
from ..events.emitter import utc_timestamp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .manifest import Job

SUMMARY_EVENTS = ("runner_exit", "resource_summary", "output_captured")


def written_objects(outcome) -> list[dict]:
    """The summary's events as the run wrote them (``Outcome.written``)."""
    return list(outcome.written.values())


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


def _command(job: Job) -> list[str] | None:
    """The job's argv as it gave it, unless it marked the argv ``secret`` (then only its digest)."""
    return None if job.secret else list(job.args)


def _started_at(started_ns: int | None) -> str | None:
    """When the job's child started, on the wall clock (``started_ns`` is the monotonic one)."""
    if started_ns is None:
        return None
    return utc_timestamp(time.time_ns() - (time.monotonic_ns() - started_ns), digits=6)


def summary_line(
    job: Job, run_id: str | None, attempts: int, outcome, events: list[dict], earlier: list[dict] | None = None
) -> dict:
    """One job's line: its exit, what the runner measured and the digests of its capture; with
    ``--retries``, ``earlier_attempts``: the attempts before this one (``attempt_record``)."""
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
        "id": job.id,
        "run_id": run_id,
        "args_sha256": fingerprint(job.args),
        "job_sha256": job.digest,
        "command": _command(job),
        "started_at": _started_at(outcome.started_ns),
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
        "earlier_attempts": earlier or [],
    }


def drop_paths(line: dict) -> None:
    """``--keep failed``: a passing job's capture was never written, so its line names no file
    (its digests and byte counts stay)."""
    for info in line["capture"].values():
        if isinstance(info, dict):
            info["path"] = None


def attempt_dir(attempt: int) -> str:
    return f"attempt-{attempt}"


def attempt_record(line: dict) -> dict:
    """What the final line keeps of an attempt that was retried; its stream and capture are in
    ``<id>/attempt-N/``."""
    keys = ("run_id", "started_at", "exit_code", "source", "duration_ms", "message")
    return {"attempt": line["attempts"], "dir": attempt_dir(line["attempts"]), **{key: line[key] for key in keys}}


def not_started_line(job: Job, attempts: int, reason: str) -> dict:
    """The line of a job the batch never started (cancelled or halted before its turn)."""
    return {
        "id": job.id,
        "run_id": None,
        "args_sha256": fingerprint(job.args),
        "job_sha256": job.digest,
        "command": _command(job),
        "started_at": None,
        "exit_code": None,
        "source": reason,
        "child_code": None,
        "duration_ms": None,
        "attempts": attempts,
        "resources": None,
        "capture": {"stdout": None, "stderr": None},
        "message": None,
        "earlier_attempts": [],
    }


def finished_jobs(path: str) -> dict[str, str | None]:
    """For ``--resume``: the jobs whose last line in an earlier summary says exit 0, with the
    digest of the job that did (None from a summary written before lines carried it)."""
    last = {entry["id"]: entry for entry in read_objects(path) if isinstance(entry.get("id"), str)}
    return {
        job_id: entry["job_sha256"] if isinstance(entry.get("job_sha256"), str) else None
        for job_id, entry in last.items()
        if entry.get("exit_code") == 0
    }
