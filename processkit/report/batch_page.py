"""A batch's page (``index.html`` in its ``--out``, and ``report DIR`` on it): what a build farm's
user looks for first, the jobs that failed and why, then every job, the totals and a timeline of
the slots.

Drawn from ``summary.jsonl`` alone (``batch_model``), so it holds every job the batch knew of,
those that never started too, with the summary's own durations; failures show the tail of their
captured stderr. Bounded for a batch of any size: at most ``FAILURES_SHOWN`` tails and
``ROWS_SHOWN`` table rows (the summary holds the rest), and a timeline of at most ``BARS_DRAWN``
bars, past which each lane is drawn as runs of pixels of one outcome.
"""

from __future__ import annotations

from ..events import render as words
from .batch_model import Attempt, Batch, Job, load
from .render import WIDTH, environment, _axis, _now
from .tail import read_tail

FAILURES_SHOWN = 200
ROWS_SHOWN = 5000
BARS_DRAWN = 4000
LANE_HEIGHT = 16
STATE_ORDER = {"failed": 0, "timed_out": 1, "cancelled": 2, "not_started": 3, "ok": 4}


def warm() -> None:
    """Compile the page's template before the batch ends (``batching.index.PageProcess``)."""
    environment().get_template("batch.html.j2")


def page_for(out: str) -> str:
    return batch_page(load(out))


def batch_page(batch: Batch) -> str:
    ordered = sorted(batch.jobs, key=lambda job: STATE_ORDER[job.state])  # stable: manifest order within
    failures = [job for job in ordered if job.state in ("failed", "timed_out", "cancelled")]
    counts = {state: sum(job.state == state for job in batch.jobs) for state in STATE_ORDER}
    wall = max(int(batch.wall_ms or 0), 1)
    return (
        environment()
        .get_template("batch.html.j2")
        .render(
            batch=batch,
            counts=counts,
            rows=ordered[:ROWS_SHOWN],
            hidden_rows=max(0, len(ordered) - ROWS_SHOWN),
            failures=[_failure(batch.out, job) for job in failures[:FAILURES_SHOWN]],
            hidden_failures=max(0, len(failures) - FAILURES_SHOWN),
            not_started=[job for job in ordered if job.state == "not_started"],
            bars=_bars(batch, wall),
            ticks=_axis(wall),
            width=WIDTH,
            lane_height=LANE_HEIGHT,
            ms=milliseconds,
            command=command_text,
            generated=_now(),
        )
    )


def milliseconds(value: float | None) -> str:
    """A duration as the summary gives it (ms, fractional), at a precision that reads: 0.352 ms,
    12.4 ms, 1.92 s, 2m 3s."""
    if value is None:
        return "—"
    if value < 10:
        return f"{value:.3f} ms"
    if value < 1000:
        return f"{value:.1f} ms"
    return words.duration(int(value))


def command_text(job: Job) -> str:
    if job.command is None:
        return "(not recorded)"
    import shlex

    return " ".join(shlex.quote(arg) for arg in job.command)


def _failure(out: str, job: Job) -> dict:
    """A failed job with the last lines of its captured stderr (or why they cannot be shown),
    read from ``<out>/<id>/capture/stderr.log`` alone: the summary's recorded path is only shown,
    since the summary may be another user's (``tail.read_tail``'s guard)."""
    html = None
    note_text: str | None = "no stderr was captured"
    info = job.stderr
    if info is not None and info.sha256 is not None:
        if "/" in job.id or job.id in (".", "..") or "\0" in job.id:
            note_text = "the job's id is not a plain name, so its capture is not looked for"
        else:
            html, note_text = read_tail(out, f"{job.id}/capture/stderr.log", info.sha256, None, None)
    return {"job": job, "tail": html, "note": note_text, "path": None if info is None else info.path}


def _bars(batch: Batch, wall: int) -> list[dict]:
    """The timeline's rectangles: one per attempt while they are few, else per lane runs of
    pixels of one state (each pixel takes the state of the last attempt drawn on it)."""
    scale = WIDTH / wall

    def extent(attempt: Attempt) -> tuple[float, float]:
        return attempt.start_ms * scale, max(attempt.duration_ms * scale, 1.0)

    if len(batch.attempts) <= BARS_DRAWN:
        bars = []
        for attempt in batch.attempts:
            x, w = extent(attempt)
            tried = f" (attempt {attempt.number})" if attempt.number > 1 else ""
            title = f"{attempt.job_id}{tried}: {attempt.outcome}, {milliseconds(attempt.duration_ms)}"
            bars.append({"x": x, "w": w, "lane": attempt.lane, "state": attempt.state, "title": title})
        return bars
    pixels: dict[int, dict[int, str]] = {}
    for attempt in batch.attempts:
        x, w = extent(attempt)
        row = pixels.setdefault(attempt.lane, {})
        for column in range(int(x), min(int(x + w) + 1, WIDTH)):
            row[column] = attempt.state
    bars = []
    for lane, columns in pixels.items():
        start, state = None, None
        for column in range(WIDTH + 1):
            here = columns.get(column)
            if here != state:
                if state is not None and start is not None:
                    bars.append({"x": start, "w": column - start, "lane": lane, "state": state, "title": state})
                start, state = column, here
    return bars
