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
import stat

from ..errors import Failure, Kind
from ..plain import Plain
from ..text import sanitize

SUMMARY = "summary.jsonl"
MAX_LINE_BYTES = 1024 * 1024
MAX_JOBS = 2_000_000


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
    lane: int | None


class Batch(Plain):
    out: str
    jobs: list[Job]
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
    starts = [_start_s(line) for line in last.values()]
    origin = min((s for s in starts if s is not None), default=None)
    jobs = [_job(line, start, origin) for line, start in zip(last.values(), starts)]
    lanes = _assign_lanes(jobs)
    spans = [span for span in map(_span, jobs) if span is not None]
    wall = max((start + length for start, length in spans), default=None)
    busy = sum(length for _, length in spans)
    return Batch(
        out=out,
        jobs=jobs,
        skipped_lines=skipped,
        lanes=lanes,
        wall_ms=wall,
        cpu_ms=sum(job.cpu_ms or 0 for job in jobs),
        jobs_per_s=len(spans) / (wall / 1000) if wall else None,
        fullness=busy / (lanes * wall) if wall and lanes else None,
    )


def _read(path: str) -> tuple[list, int]:
    """The decoded lines of the summary, each bounded; and how many could not be decoded."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot read {sanitize(path)}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Failure(Kind.SETUP, f"cannot read {sanitize(path)}: not a regular file")
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


def _start_s(line: dict) -> float | None:
    text = line.get("started_at")
    if not isinstance(text, str) or len(text) > 40:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _job(line: dict, start_s: float | None, origin: float | None) -> Job:
    code = _int(line.get("exit_code"))
    source = _typed(line.get("source"), str, "unknown")
    resources = _typed(line.get("resources"), dict, {})
    capture = _typed(line.get("capture"), dict, {})
    command = line.get("command")
    message = line.get("message")
    duration = _number(line.get("duration_ms"))
    state, outcome = _outcome(code, source, duration)
    return Job(
        id=line["id"],
        command=command if isinstance(command, list) and all(isinstance(a, str) for a in command) else None,
        state=state,
        outcome=outcome,
        exit_code=code,
        source=source,
        message=message if isinstance(message, str) else None,
        duration_ms=duration,
        attempts=_int(line.get("attempts")) or 0,
        peak_memory=_int(resources.get("peak_memory_bytes")),
        cpu_ms=_int(resources.get("total_cpu_ms")),
        start_ms=None if start_s is None or origin is None else (start_s - origin) * 1000,
        stderr=capture.get("stderr") if isinstance(capture.get("stderr"), dict) else None,
        lane=None,
    )


def _outcome(code: int | None, source: str, duration: float | None) -> tuple[str, str]:
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


def _span(job: Job) -> tuple[float, float] | None:
    """(start, duration) of a job that ran, in ms."""
    if job.start_ms is None or job.duration_ms is None:
        return None
    return job.start_ms, job.duration_ms


def _assign_lanes(jobs: list[Job]) -> int:
    """Give each job that ran a lane, the lowest one free at its start (jobs in start order),
    so a lane is one slot's sequence of jobs; returns how many lanes that took."""
    ran = sorted(((span, job) for job in jobs if (span := _span(job)) is not None), key=lambda pair: pair[0])
    free: list[int] = []
    busy: list[tuple[float, int]] = []  # (end, lane)
    lanes = 0
    for (start, length), job in ran:
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, lanes = lanes, lanes + 1
        job.lane = lane
        heapq.heappush(busy, (start + length, lane))
    return lanes
