"""Runs into HTML pages through Jinja2 templates (package data, autoescaped): one run's page,
or an index of many. Pages are self-contained: inline CSS and SVG, one small inline script
for table sorting in the index, nothing fetched.

Geometry (where a bar or a marker goes) is computed here, so templates only place numbers.
"""

from __future__ import annotations

import datetime
import functools

from ..events import render as words
from ..events.kept import ranges, salvage
from ..events.types import CapturedStream
from .model import Moment, Run, capture_place
from .tail import read_tail, recovered_tail
from ..plain import Plain
from ..text import plural

WIDTH = 960  # the drawing width of time axes, in SVG units
LABEL_WIDTH = 220  # the process tree's name column
ROW = 20
MEMBERS_DRAWN = 400  # a fork bomb's tree is summarised, not drawn bar by bar
HISTOGRAM_BINS = 24
FOLD_AFTER = 6  # consecutive snapshots listed one by one in the timeline table


class Tail(Plain):
    stream: CapturedStream
    html: object
    note: str | None


@functools.cache
def environment():
    """The one template environment of the process: a template is compiled once however many
    pages it draws."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("processkit.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["duration"] = lambda ms: "—" if ms is None else words.duration(ms)
    environment.filters["size"] = lambda count: "—" if count is None else words.size(count)
    environment.filters["plural"] = plural
    return environment


def _axis(total_ms: int, label=words.duration) -> list[tuple[float, str]]:
    """About six ticks on a time axis of ``total_ms``, at round steps, each written by ``label``
    (a page writes its durations one way)."""
    steps = (
        1,
        2,
        5,
        10,
        20,
        50,
        100,
        200,
        500,
        1000,
        2000,
        5000,
        10_000,
        15_000,
        30_000,
        60_000,
        120_000,
        300_000,
        600_000,
        1_800_000,
        3_600_000,
    )
    step = next((s for s in steps if total_ms / s <= 6), 3_600_000 * max(1, total_ms // (6 * 3_600_000)))
    return [(WIDTH * t / total_ms, label(t)) for t in range(0, total_ms + 1, step)]


def _x(offset_ms: int | None, total_ms: int) -> float:
    return 0.0 if offset_ms is None else WIDTH * offset_ms / total_ms


def single_page(run: Run, capture_dir: str | None) -> str:
    total = max(run.duration_ms or 0, 1)
    tails = []
    for stream in run.captured:
        directory, inside = capture_place(stream, capture_dir, run.path)
        kept = ranges(stream, run.run_id, inside, inside=directory)  # read as the capture is
        html, note = read_tail(
            directory, inside, stream.sha256, kept, stream.bytes_seen, capture_dir is not None, run.failed
        )
        tails.append(Tail(stream, html, note))
    if not run.captured and capture_dir is not None:  # a ring run whose runner died or goes on: its live record
        found = (salvage(capture_dir, run.run_id) or {}).values()
        state = "live" if run.live else "unknown" if run.exit_code is None else "ended"
        tails = [Tail(*recovered_tail(item, state)) for item in found]
    drawn = run.members[:MEMBERS_DRAWN]
    return (
        environment()
        .get_template("run.html.j2")
        .render(
            run=run,
            tails=tails,
            width=WIDTH,
            label_width=LABEL_WIDTH,
            row=ROW,
            ticks=_axis(total),
            marks=_marks(run.moments, total),
            rows=_folded(run.moments),
            bars=[(_x(m.first_ms, total), max(_x(m.until_ms, total) - _x(m.first_ms, total), 2.0), m) for m in drawn],
            hidden_members=len(run.members) - len(drawn),
            generated=_now(),
        )
    )


def _marks(moments: list[Moment], total: int) -> list[tuple[float, Moment]]:
    """Where each moment sits on the axis; snapshots closer than a unit apart share a mark, so
    a long run's thousands of snapshots stay a light drawing."""
    marks, snapshot_units = [], set()
    for moment in moments:
        x = _x(moment.offset_ms, total)
        if moment.kind == "snapshot":
            if int(x) in snapshot_units:
                continue
            snapshot_units.add(int(x))
        marks.append((x, moment))
    return marks


def _folded(moments: list[Moment]) -> list[Moment]:
    """The timeline table's rows: a run of more than FOLD_AFTER snapshots keeps its first and
    last, with one row saying how many lie between."""
    rows: list[Moment] = []
    run: list[Moment] = []
    for moment in moments + [None]:
        if moment is not None and moment.kind == "snapshot":
            run.append(moment)
            continue
        if len(run) > FOLD_AFTER:
            between = len(run) - 2
            rows += [
                run[0],
                Moment(
                    run[1].offset_ms,
                    "…",
                    f"{between} more snapshots, until +{words.duration(run[-2].offset_ms or 0)}",
                    "snapshot",
                ),
                run[-1],
            ]
        else:
            rows += run
        run = []
        if moment is not None:
            rows.append(moment)
    return rows


def index_page(runs: list[Run]) -> str:
    ordered = sorted(runs, key=lambda r: (not r.failed, r.run_id or "", r.source))
    durations = [r.duration_ms for r in runs if r.duration_ms is not None]
    return (
        environment()
        .get_template("index.html.j2")
        .render(
            runs=ordered,
            failed=sum(r.failed for r in runs),
            histogram=_histogram(durations),
            width=WIDTH,
            generated=_now(),
        )
    )


def _histogram(durations: list[int]) -> dict:
    """Bars of a duration histogram: x, width and height in SVG units, with a caption each."""
    if not durations:
        return {"bars": [], "low": 0, "high": 0, "peak": 0}
    low, high = min(durations), max(durations)
    span = max(high - low, 1)
    counts = [0] * HISTOGRAM_BINS
    for value in durations:
        counts[min(int((value - low) * HISTOGRAM_BINS / span), HISTOGRAM_BINS - 1)] += 1
    peak = max(counts)
    slot = WIDTH / HISTOGRAM_BINS
    bars = []
    for index, count in enumerate(counts):
        start = low + span * index // HISTOGRAM_BINS
        end = low + span * (index + 1) // HISTOGRAM_BINS
        caption = f"{plural(count, 'run')} from {words.duration(start)} to {words.duration(end)}"
        bars.append({"x": index * slot + 1, "w": slot - 2, "h": 100 * count / peak, "count": count, "caption": caption})
    return {"bars": bars, "low": low, "high": high, "peak": peak}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
