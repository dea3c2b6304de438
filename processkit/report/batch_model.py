"""A batch's ``--out`` read as typed jobs: its ``summary.jsonl``, the one record of every job
(those that never started included), read with bounds, its last line per job winning (a
``--resume`` appends), in the order jobs first appear.

The summary is untrusted input like any stream: each line is bounded, the file is opened without
blocking and only when it is a regular file, a line that is not a job's object is counted and
skipped, and every field is checked for its type before it is used.
"""

from __future__ import annotations

import datetime
import heapq
import json
import os

from ..errors import Failure, Kind
from ..plain import Plain
from ..text import sanitize
from ..bounded import SUMMARY as SUMMARY_LIMITS
from ..bounded import open_input

SUMMARY = "summary.jsonl"
MAX_LINE_BYTES = 1024 * 1024
MAX_JOBS = 2_000_000


class Attempt(Plain):
    """One run of a job (a retried job has several), as the timeline and the trace draw it."""

    job_id: str
    number: int
    start_ms: float
    duration_ms: float
    state: str
    outcome: str
    lane: int = 0


class Job(Plain):
    """One job as its last summary line says: ``state`` is ``ok``, ``failed``, ``timed_out``,
    ``cancelled`` or ``not_started``; times in ms from the batch's first start."""

    id: str
    command: list | None
    state: str
    outcome: str  # a few words: "exit 0", "exit 3", "timed out after 1s", "not started: halted"
    exit_code: int | None
    source: str
    message: str | None
    duration_ms: float | None
    attempts: int
    peak_memory: int | None
    cpu_ms: int | None
    start_ms: float | None
    stderr: dict | None  # the summary's captureInfo of stderr
    tries: list[Attempt]  # every attempt that ran, the earlier ones of a retried job first


class Batch(Plain):
    out: str
    jobs: list[Job]
    attempts: list[Attempt]
    skipped_lines: int
    lanes: int
    wall_ms: float | None
    cpu_ms: int
    jobs_per_s: float | None
    fullness: float | None  # busy slot time over lanes × wall


def is_batch_out(path: str) -> bool:
    return os.path.isdir(path) and os.path.lexists(os.path.join(path, SUMMARY))


def load(out: str) -> Batch:
    """``out``'s jobs; a Failure when its summary cannot be read (111) or holds no job (114)."""
    path = os.path.join(out, SUMMARY)
    lines, skipped = _read(path)
    last: dict[str, dict] = {}
    for line in lines:
        if isinstance(line, dict) and isinstance(line.get("id"), str):
            last.pop(line["id"], None)  # the latest line, but in the order of the first
            last[line["id"]] = line
        else:
            skipped += 1
    if not last:
        raise Failure(Kind.EVENTS_INVALID, f"{sanitize(path)} holds no job's line")
    starts = [_start_s(line.get("started_at")) for line in last.values()]
    starts += [_start_s(attempt.get("started_at")) for line in last.values() for attempt in _earlier(line)]
    origin = min((s for s in starts if s is not None), default=None)
    jobs = [_job(line, origin) for line in last.values()]
    attempts = [attempt for job in jobs for attempt in job.tries]
    lanes = _assign_lanes(attempts)
    wall = max((a.start_ms + a.duration_ms for a in attempts), default=None)
    busy = sum(a.duration_ms for a in attempts)
    return Batch(
        out=out,
        jobs=jobs,
        attempts=attempts,
        skipped_lines=skipped,
        lanes=lanes,
        wall_ms=wall,
        cpu_ms=sum(job.cpu_ms or 0 for job in jobs),
        jobs_per_s=sum(job.state != "not_started" for job in jobs) / (wall / 1000) if wall else None,
        fullness=busy / (lanes * wall) if wall and lanes else None,
    )


def history(path: str) -> tuple[dict[str, float], dict[str, int]]:
    """``batch --history``: each job's last duration and last peak memory (bytes) in an earlier
    summary, by id."""
    lines, _ = _read(path)
    took: dict[str, float] = {}
    peaks: dict[str, int] = {}
    for line in lines:
        if isinstance(line, dict) and isinstance(line.get("id"), str):
            duration = _number(line.get("duration_ms"))
            if duration is not None:
                took[line["id"]] = duration
            resources = line.get("resources")
            peak = _int(resources.get("peak_memory_bytes")) if isinstance(resources, dict) else None
            if peak is not None and peak > 0:
                peaks[line["id"]] = peak
    return took, peaks


def _read(path: str) -> tuple[list, int]:
    """The decoded lines of the summary, each bounded; and how many could not be decoded."""
    try:
        fd = open_input(path, SUMMARY_LIMITS)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot read {sanitize(path)}: {exc.strerror}") from None
    except ValueError as exc:  # bounded.InputError: not a regular file, or over its size
        raise Failure(Kind.SETUP, str(exc)) from None
    with os.fdopen(fd, "rb") as handle:
        values: list = []
        skipped = 0
        while line := handle.readline(MAX_LINE_BYTES + 1):
            if len(values) >= MAX_JOBS:
                raise Failure(Kind.EVENTS_INVALID, f"{sanitize(path)} has more than {MAX_JOBS} lines")
            if len(line) > MAX_LINE_BYTES:  # the rest of that line is skipped, never held
                skipped += 1
                while line and not line.endswith(b"\n"):
                    line = handle.readline(MAX_LINE_BYTES)
                continue
            try:
                values.append(json.loads(line))
            except (ValueError, RecursionError):
                skipped += 1
    return values, skipped


def _number(value) -> float | None:
    return float(value) if type(value) in (int, float) and abs(value) < 1e15 else None


def _int(value) -> int | None:
    return value if type(value) is int and abs(value) < 1 << 62 else None


def _start_s(text) -> float | None:
    if not isinstance(text, str) or len(text) > 40:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _earlier(line: dict) -> list[dict]:
    found = line.get("earlier_attempts")
    return [a for a in found[:1000] if isinstance(a, dict)] if isinstance(found, list) else []


def _attempt(job_id: str, number: int, values: dict, origin: float | None) -> Attempt | None:
    """An attempt that ran (a start and a duration), placed on the batch's clock."""
    start = _start_s(values.get("started_at"))
    duration = _number(values.get("duration_ms"))
    if start is None or origin is None or duration is None:
        return None
    source = _typed(values.get("source"), str, "unknown")
    state, outcome = _outcome(_int(values.get("exit_code")), source)
    return Attempt(job_id, number, (start - origin) * 1000, duration, state, outcome)


def _job(line: dict, origin: float | None) -> Job:
    code = _int(line.get("exit_code"))
    source = _typed(line.get("source"), str, "unknown")
    resources = _typed(line.get("resources"), dict, {})
    capture = _typed(line.get("capture"), dict, {})
    command = line.get("command")
    message = line.get("message")
    state, outcome = _outcome(code, source)
    attempts = _int(line.get("attempts")) or 0
    earlier = [_attempt(line["id"], n, values, origin) for n, values in enumerate(_earlier(line), 1)]
    final = _attempt(line["id"], attempts, line, origin)
    tries = [attempt for attempt in (*earlier, final) if attempt is not None]
    return Job(
        id=line["id"],
        command=command if isinstance(command, list) and all(isinstance(a, str) for a in command) else None,
        state=state,
        outcome=outcome,
        exit_code=code,
        source=source,
        message=message if isinstance(message, str) else None,
        duration_ms=_number(line.get("duration_ms")),
        attempts=attempts,
        peak_memory=_int(resources.get("peak_memory_bytes")),
        cpu_ms=_int(resources.get("total_cpu_ms")),
        start_ms=final.start_ms if final is not None else None,
        stderr=capture.get("stderr") if isinstance(capture.get("stderr"), dict) else None,
        tries=tries,
    )


def _outcome(code: int | None, source: str) -> tuple[str, str]:
    if code is None:
        return "not_started", f"not started: {source}"
    if code == 0:
        return "ok", "exit 0"
    if source in ("timeout", "idle_timeout"):
        return "timed_out", f"{'idle ' if source == 'idle_timeout' else ''}timed out (exit {code})"
    if source == "cancelled":
        return "cancelled", f"cancelled (exit {code})"
    return "failed", f"exit {code}" if source == "child_exit" else f"exit {code} ({source})"


def _typed(value, kind: type, default):
    return value if isinstance(value, kind) else default


def _assign_lanes(attempts: list[Attempt]) -> int:
    """Give each attempt a lane, the lowest one free at its start (in start order), so a lane is
    one slot's sequence of runs; returns how many lanes that took."""
    free: list[int] = []
    busy: list[tuple[float, int]] = []  # (end, lane)
    lanes = 0
    for attempt in sorted(attempts, key=lambda a: a.start_ms):
        while busy and busy[0][0] <= attempt.start_ms:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            attempt.lane = heapq.heappop(free)
        else:
            attempt.lane, lanes = lanes, lanes + 1
        heapq.heappush(busy, (attempt.start_ms + attempt.duration_ms, attempt.lane))
    return lanes
