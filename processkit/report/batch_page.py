"""A batch's page (``index.html`` in its ``--out``, and ``report DIR`` on it): what a build farm's
user looks for first, the jobs that failed and why, then those a cancel ended, every job, the
totals and a timeline of the slots.

Drawn from ``summary.jsonl`` alone (``batch_model``), so it holds every job the batch knew of,
those that never started too, with the summary's own durations, all written one way
(``milliseconds``); failures show the tail of each captured stream that holds something (a test
runner fails on stdout, a compiler on stderr). Bounded for a batch of any size: at most
``FAILURES_SHOWN`` jobs' tails and
``ROWS_SHOWN`` table rows (the summary holds the rest), and a timeline of at most ``BARS_DRAWN``
bars, past which each lane is drawn as runs of pixels of one outcome.
"""

from __future__ import annotations

import os

from ..capture_layout import FILE_NAMES, STREAMS
from ..events.dropped import kept_ranges
from ..text import milliseconds
from .batch_model import Attempt, Batch, Job, Summary, load
from .render import WIDTH, environment, _axis, _now
from .tail import read_tail

FAILURES_SHOWN = 200
ROWS_SHOWN = 5000
BARS_DRAWN = 4000
LANE_HEIGHT = 16
STATE_ORDER = {"failed": 0, "timed_out": 1, "task_failed": 2, "cancelled": 3, "not_started": 4, "ok": 5}
# The page's sections of jobs shown with their captures' tails, in order: (heading, states).
SECTIONS = (("Failures", ("failed", "timed_out", "task_failed")), ("Cancelled", ("cancelled",)))
SHOWN = {state for _, states in SECTIONS for state in states}


def warm() -> None:
    """Compile the page's template before the batch ends (``batching.index.PageProcess``)."""
    environment().get_template("batch.html.j2")


def page_for(out: str, gone: frozenset[str] = frozenset(), summary: Summary | None = None) -> str:
    return batch_page(load(out, gone, summary))


def captures_read(batch: Batch) -> list[str]:
    """The capture files the page may read (``report DIR -o FILE`` never writes over one)."""
    _, shown = _ordered(batch)
    return [os.path.join(batch.out, inside) for job in shown[:FAILURES_SHOWN] for inside in _insides(job) if inside]


def _ordered(batch: Batch) -> tuple[list[Job], list[Job]]:
    """Every job, failed first (stable: manifest order within), and those shown with their tails."""
    ordered = sorted(batch.jobs, key=lambda job: STATE_ORDER[job.state])
    return ordered, [job for job in ordered if job.state in SHOWN]


def _insides(job: Job) -> list[str | None]:
    """Each stream's capture file inside ``--out`` (None for all when the id is no plain name)."""
    plain = "/" not in job.id and job.id not in (".", "..") and "\0" not in job.id
    return [f"{job.id}/capture/{FILE_NAMES[name]}" if plain else None for name in STREAMS]


def batch_page(batch: Batch) -> str:
    ordered, shown = _ordered(batch)
    counts = {state: sum(job.state == state for job in batch.jobs) for state in STATE_ORDER}
    wall = max(int(batch.wall_ms or 0), 1)
    tails = [_failure(batch.out, job) for job in shown[:FAILURES_SHOWN]]
    sections = [(heading, [t for t in tails if t["job"].state in states]) for heading, states in SECTIONS]
    return (
        environment()
        .get_template("batch.html.j2")
        .render(
            batch=batch,
            counts=counts,
            rows=[_row(job) for job in ordered[:ROWS_SHOWN]],
            hidden_rows=max(0, len(ordered) - ROWS_SHOWN),
            sections=[(heading, jobs) for heading, jobs in sections if jobs],
            shown_states=SHOWN,
            hidden_failures=max(0, len(shown) - FAILURES_SHOWN),
            not_started=[job for job in ordered if job.state == "not_started"],
            bars=_bars(batch, wall),
            ticks=_axis(wall, milliseconds),
            width=WIDTH,
            lane_height=LANE_HEIGHT,
            ms=milliseconds,
            command=command_text,
            generated=_now(),
        )
    )


def _row(job: Job) -> tuple[Job, str, str, str]:
    """A table row's job with its texts made here: a call from the template costs it a lookup
    and an inspection each, a tenth of the page's draw in a batch of thousands."""
    return job, command_text(job), milliseconds(job.duration_ms), milliseconds(job.cpu_ms)


def command_text(job: Job) -> str:
    if job.command is None:
        return "(not recorded)"
    import shlex

    return " ".join(shlex.quote(arg) for arg in job.command)


def _failure(out: str, job: Job) -> dict:
    """A failed job with the last lines of each of its captures that holds something (or why
    they cannot be shown), labelled with its stream, each read from ``<out>/<id>/capture/`` alone:
    the summary's recorded path is only shown, since the summary may be another user's
    (``tail.read_tail``'s guard)."""
    tails = []
    for name, info, inside in zip(STREAMS, (job.stdout, job.stderr), _insides(job)):
        if info is None or info.sha256 is None or info.bytes == 0:
            continue
        if inside is not None:
            cut = info.truncated or info.write_error  # a failed write cuts the file as the cap does
            kept = kept_ranges(name, info, job.run_id, inside, inside=out) if cut else None
            html, note = read_tail(
                out, inside, info.sha256, kept, info.bytes_seen if kept is not None else None, failed=True
            )
        else:
            html, note = None, "the job's id is not a plain name, so its capture is not looked for"
        tails.append({"stream": name, "tail": html, "note": note, "path": info.path})
    return {"job": job, "tails": tails}


def _bars(batch: Batch, wall: int) -> list[dict]:
    """The timeline's rectangles: one per attempt while they are few, else per lane runs of
    pixels of one state (each pixel takes the state of the last attempt drawn on it)."""
    scale = WIDTH / wall

    def extent(attempt: Attempt) -> tuple[float, float]:
        return attempt.start_ms * scale, max(attempt.duration_ms * scale, 1.0)

    if len(batch.attempts) <= BARS_DRAWN:
        bars = []
        retried = {attempt.job_id for attempt in batch.attempts if attempt.number > 1}  # each attempt named
        for attempt in batch.attempts:
            x, w = extent(attempt)
            tried = f" (attempt {attempt.number})" if attempt.job_id in retried else ""
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
