"""A benchmark export (``bench --export-json``, or hyperfine's) as an HTML page: the figures per
command, the comparison, a baseline's verdicts (the file's own, or ``report OLD.json NEW.json``),
each command's distribution (box plot, runs as points), the runs in the order they ran (drift
and warm-up show there) and memory. Geometry is computed here from the checked model
(``benchmark.recorded``); the template (``bench.html.j2``) only places it.

What is drawn is bounded, whatever the file holds: at most ``POINTS_PER_COMMAND`` runs of a
command as points (fewer when there are many commands) and ``SEQUENCE_POINTS`` in the order
chart (an even sample, the extremes and outliers kept); the box plots and the figures are over
every run, the significance tests over an even sample (``recorded.TESTED_RUNS``).
"""

from __future__ import annotations

import datetime
import math
import re

from ..benchmark import baseline as against_baseline
from ..benchmark.recorded import ORIGIN_HYPERFINE, RecordedBench, RecordedCommand
from ..benchmark.stats import compare
from ..bounded import BENCH_EXPORT, WrongKind, loads, read_start
from ..pathtrust import UnsafePath
from ..userfiles import open_judged
from . import axes

WIDTH = 900
LABEL = 200  # the command names' column
RIGHT = 40  # room for the last tick's label, inside the drawing
PLOT_END = WIDTH - RIGHT
ROW = 34
PAIRED_ROW = 46  # a command and its baseline, one above the other
SEQUENCE_HEIGHT = 200
SEQUENCE_TOP, SEQUENCE_BOTTOM = 12, SEQUENCE_HEIGHT - 34
MEMORY_END = 680  # the memory bars' scale ends here; the figures are written beyond it
POINTS_PER_COMMAND = 400
DISTRIBUTION_POINTS = 20_000  # all commands together, at least MIN_POINTS each
MIN_POINTS = 10
SEQUENCE_POINTS = 2000
HEAD_BYTES = 64 * 1024
FLOOR_MARK = " (bench's floor)"
COLOURS = ("#2f5fb3", "#e0a040", "#1f7a3f", "#b3261e", "#6b4bb3")
_RESULTS_FIRST = re.compile(rb'\{\s*"results"\s*:')


def is_bench_export(path: str) -> bool:
    """One JSON document (not a JSONL stream): its first line is an object holding ``results``,
    or an unfinished piece of one (a pretty-printed document). Only the head is read, within
    ``bounded.BENCH_EXPORT`` (a regular file: a FIFO or a device is no export), once the name is
    walked (``userfiles.open_judged``): a file another user's link leads to is not sniffed (what
    it holds would change which error is shown), its refusal raised (``UnsafePath``)."""
    try:
        head = read_start(path, HEAD_BYTES, BENCH_EXPORT, open_judged)
    except UnsafePath:
        raise
    except (OSError, WrongKind):
        return False
    text = head.lstrip()
    if not text.startswith(b"{"):
        return False
    line = text.split(b"\n", 1)[0]
    leads = _RESULTS_FIRST.match(text) is not None  # as ours and hyperfine's (and jq's) write it
    try:
        first = loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return leads
    except ValueError:  # a pretty-printed document's "{", a line longer than the head, too deep
        return line.strip() == b"{" or leads
    return isinstance(first, dict) and "results" in first


def _spaced(count: int, limit: int) -> list[int]:
    """Up to ``limit`` indices spread evenly over ``range(count)``, first and last included."""
    if count <= limit:
        return list(range(count))
    if limit < 2:
        return [0]
    return sorted({round(i * (count - 1) / (limit - 1)) for i in range(limit)})


def _drawn(command: RecordedCommand, limit: int) -> list[int]:
    """Which runs are drawn as points: an even sample, plus the fastest, slowest and outliers."""
    times = command.times
    if len(times) <= limit:
        return list(range(len(times)))
    chosen = set(_spaced(len(times), limit))
    chosen.update(command.outliers[: limit // 4])
    chosen.update((times.index(min(times)), times.index(max(times))))
    return sorted(chosen)


def _quantiles(times: list[float]) -> tuple[float, float, float, float, float]:
    ordered = sorted(times)
    last = len(ordered) - 1

    def at(q: float) -> float:
        position = q * last
        below = int(position)
        above = min(below + 1, last)
        return ordered[below] + (ordered[above] - ordered[below]) * (position - below)

    return ordered[0], at(0.25), at(0.5), at(0.75), ordered[-1]


def _box(command: RecordedCommand, y: float, axis: axes.Axis, budget: int, *, baseline: bool = False) -> dict:
    low, q1, median, q3, high = (axis.at(value) for value in _quantiles(command.times))
    outliers = set(command.outliers)
    drawn = _drawn(command, budget)
    jitter = 4 if baseline else 5
    return {
        "y": y,
        "half": 5 if baseline else 9,
        "low": low,
        "q1": q1,
        "median": median,
        "q3": q3,
        "high": high,
        "baseline": baseline,
        "points": [
            {
                "x": axis.at(command.times[i]),
                "y": y + ((i * 7) % (2 * jitter + 1)) - jitter,
                "outlier": i in outliers,
                "title": f"{'baseline ' if baseline else ''}run {i}: {axes.duration(command.times[i])}",
            }
            for i in drawn
        ],
        "drawn": len(drawn),
        "runs": len(command.times),
    }


def _distribution(bench: RecordedBench, old: dict[int, RecordedCommand]) -> dict:
    measured = [c for c in bench.commands if c.times]
    every = [t for c in measured for t in (min(c.times), max(c.times))]
    every += [t for c in old.values() if c.times for t in (min(c.times), max(c.times))]
    low, high = (min(every), max(every)) if every else (0.0, 1.0)
    axis = axes.Axis(low, high, LABEL, PLOT_END, axes.time_unit(high))
    row = PAIRED_ROW if old else ROW
    budget = max(MIN_POINTS, min(POINTS_PER_COMMAND, DISTRIBUTION_POINTS // max(len(bench.commands), 1)))
    rows = []
    for index, command in enumerate(bench.commands):
        y = 20 + index * row
        entry = {"name": command.name, "y": y, "box": None, "baseline": None}
        if command.times:
            entry["box"] = _box(command, y - (7 if old else 0), axis, budget)
        previous = old.get(index)
        if previous is not None and previous.times:
            entry["baseline"] = _box(previous, y + 12, axis, budget, baseline=True)
        rows.append(entry)
    height = 40 + len(rows) * row
    return {"rows": rows, "ticks": axis.ticks, "height": height}


def _sequence(bench: RecordedBench) -> dict:
    """Every run at its place in the benchmark's order, the warm-up runs first (hollow)."""
    width = max(len(bench.commands), 1)
    budget = max(1, SEQUENCE_POINTS // width)
    points = []  # (order, seconds, series, title, warm-up)
    for series, command in enumerate(bench.commands):
        warmups = command.warmups
        first = min(command.order, default=0)
        for k in _spaced(len(warmups), budget):
            if bench.order == "sequential":  # just before the command's own first run
                place = first - 1 + (k + 1) / (len(warmups) + 1)
            else:  # interleaved rounds before order 0
                place = (k - len(warmups)) * width + series
            points.append((place, warmups[k], series, f"warm-up {k + 1}", True))
        for i in _drawn(command, budget):
            points.append((command.order[i], command.times[i], series, f"run {command.order[i]}", False))
    if not points:
        return {"points": [], "x_ticks": [], "y_ticks": [], "height": SEQUENCE_HEIGHT, "drawn": 0}
    first, last = min(p[0] for p in points), max(p[0] for p in points)
    high = max(p[1] for p in points)
    x = axes.Axis(first, max(last, 1), LABEL, PLOT_END, axes.COUNT, count=8)
    y = axes.Axis(0.0, high, SEQUENCE_BOTTOM, SEQUENCE_TOP, axes.time_unit(high), count=5)
    names = [command.name for command in bench.commands]
    return {
        "points": [
            {
                "x": x.at(order),
                "y": y.at(seconds),
                "series": series,
                "title": f"{names[series]}: {title}, {axes.duration(seconds)}",
                "warmup": warm,
            }
            for order, seconds, series, title, warm in points
        ],
        "x_ticks": [tick for tick, value in zip(x.ticks, x.values) if value >= 0],  # warm-ups: before 0
        "y_ticks": y.ticks,
        "height": SEQUENCE_HEIGHT,
        "drawn": sum(1 for p in points if not p[4]),
    }


def _floored(command) -> bool:
    """Whether every run of ``command`` read no more than bench's own resident set by its last
    run (``max_rss_floors_byte``, its own: never another command's higher mark), the floor of each
    run's ``memory_usage_byte`` as bench was at its spawn (docs/bench.md): each may have read
    bench's, not the command's."""
    floor, values = command.rss_floor, command.memory
    return floor is not None and bool(values) and max(values) <= floor


def _memory(bench: RecordedBench, field: str = "memory") -> dict:
    """A chart of one memory figure per command: ``memory`` (hyperfine's ``memory_usage_byte``,
    the run's maximum resident set) or ``tree_memory`` (the whole tree's group's peak)."""
    peak = max((max(getattr(c, field)) for c in bench.commands if getattr(c, field)), default=0)
    axis = axes.Axis(0.0, float(peak or 1024), LABEL, MEMORY_END, axes.byte_unit(peak or 1024), count=5)
    rows = []
    for index, command in enumerate(bench.commands):
        y = 12 + index * ROW
        values = getattr(command, field)
        if not values:
            rows.append({"name": command.name, "y": y, "measured": False})
            continue
        mean, top = sum(values) / len(values), max(values)
        rows.append(
            {
                "name": command.name,
                "y": y,
                "measured": True,
                "width": axis.at(mean) - LABEL,
                "max_x": axis.at(top),
                "figures": f"mean {axes.size(mean)}, max {axes.size(top)}"
                + (FLOOR_MARK if field == "memory" and _floored(command) else ""),
            }
        )
    measured = any(row["measured"] for row in rows)
    return {"rows": rows, "ticks": axis.ticks, "height": 36 + len(rows) * ROW, "end": MEMORY_END, "measured": measured}


def _table(bench: RecordedBench) -> list[dict]:
    rows = []
    for command in bench.commands:
        s, cpu = command.summary, command.cpu_summary
        memory = command.memory
        rows.append(
            {
                "name": command.name,
                "runs": len(command.times),
                "finished": s is not None,
                "mean": axes.spread(s.mean, s.stddev) if s else None,
                "median": axes.duration(s.median) if s else None,
                "range": axes.span(s.min, s.max, axes.time_unit(s.mean)) if s else None,
                "cpu_split": f"{axes.duration(command.user)} / {axes.duration(command.system)}",
                "cpu": axes.spread(cpu.mean, cpu.stddev) if cpu else "—",
                "memory": _mean_max(memory) + (FLOOR_MARK if _floored(command) else ""),
                "tree_memory": _mean_max(command.tree_memory),
                "timed_out": "—" if command.timed_out is None else command.timed_out,
            }
        )
    return rows


def _mean_max(values: list) -> str:
    return f"{axes.size(sum(values) / len(values))} / {axes.size(max(values))}" if values else "not measured"


def _counters(bench: RecordedBench) -> dict | None:
    """The perf counters' table (mean per run, per command) and the ones the host lacked."""
    from ..benchmark.counters import LABELS, NAMES, shown

    if not any(command.counters for command in bench.commands):
        return None
    present = [n for n in NAMES if any((c.counters or {}).get(n) for c in bench.commands)]
    missing = [LABELS[n].lower() for n in NAMES if n not in present]
    rows = []
    for command in bench.commands:
        means = dict(shown({n: (command.counters or {}).get(n) for n in present}))
        rows.append({"name": command.name, "cells": [means.get(LABELS[n], "—") for n in present]})
    return {"names": [LABELS[n] for n in present], "rows": rows, "missing": missing}


def _comparison(bench: RecordedBench) -> dict | None:
    samples = bench.samples()
    measured = bench.measured()
    given = 0 if bench.reference and measured and measured[0] is bench.commands[0] else None  # --reference
    compared = compare([(name, summary, times) for name, _, summary, times, _ in samples], given)
    unmeasured = bench.cpu_unmeasured()
    if compared is None:
        if not unmeasured:
            return None
        return {"fastest": None, "reference": False, "by_cpu": True, "others": [], "unmeasured": unmeasured}
    reference, others = compared
    return {
        "unmeasured": unmeasured,
        "fastest": samples[reference][0],
        "reference": given is not None,
        "by_cpu": bench.metric == "cpu",
        "others": [
            {
                "command": other.name,
                "ratio": None  # over a mean of 0
                if not math.isfinite(other.ratio)
                else f"{other.ratio:.2f}" + ("" if other.ratio_stddev is None else f" ± {other.ratio_stddev:.2f}"),
                "test": other.verdict(),
            }
            for other in others
        ],
    }


def _against(report: against_baseline.BaselineReport | None) -> dict | None:
    if report is None:
        return None
    return {
        "file": report.file,
        "by_cpu": report.metric == "cpu",
        "rows": [
            {
                "command": entry.command,
                "baseline_command": entry.baseline_command,
                "baseline_mean": axes.duration(entry.baseline_mean),
                "mean": axes.duration(entry.mean),
                "ratio": "—"
                if entry.ratio is None
                else f"{entry.ratio:.2f}" + ("" if entry.ratio_stddev is None else f" ± {entry.ratio_stddev:.2f}"),
                "p_value": "—" if entry.p_value is None else f"{entry.p_value:.2g}",
                "verdict": entry.verdict + against_baseline.timed_out_words(entry),
                "class": entry.verdict.replace(" ", "-"),
            }
            for entry in report.commands
        ],
    }


def page_model(bench: RecordedBench, old: RecordedBench | None = None) -> dict:
    """The page's values; with ``old``, ``bench`` is drawn against it (``report OLD NEW``)."""
    report, paired = bench.baseline, {}
    if old is not None:
        metric = old.metric_for(bench.metric)
        mine, theirs = bench.measured("wall"), old.measured("wall")  # paired whatever their CPU (``against``)
        current, earlier = bench.samples(metric, every=True), old.samples(metric, True, bench.timeout_ms)
        report = against_baseline.against(current, earlier, old.source, metric, old.joined)
        place = {id(command): index for index, command in enumerate(bench.commands)}
        for command, hit in zip(mine, against_baseline.match(current, earlier, old.joined)):
            if hit is not None:
                paired[place[id(command)]] = theirs[hit]
    hyperfine = bench.origin == ORIGIN_HYPERFINE
    return {
        "title": " vs ".join(command.name for command in bench.commands),
        "hyperfine": hyperfine,
        "order": bench.order,
        "cpus": bench.cpus,
        "interval": bench.interval,
        "count": len(bench.commands),
        "table": _table(bench),
        "tree_split": bench.joined,  # user and system the tree's, in an export before processkit-bench/3
        "comparison": _comparison(bench),
        "against": _against(report),
        "old": None if old is None else old.source,
        "distribution": _distribution(bench, paired),
        "sequence": _sequence(bench),
        "memory": _memory(bench),
        "rss_floor": None if bench.max_rss_floor is None else axes.size(bench.max_rss_floor),
        "tree_memory": _memory(bench, "tree_memory") if any(c.tree_memory for c in bench.commands) else None,
        "counters": _counters(bench),
        "colours": COLOURS,
        "width": WIDTH,
        "label": LABEL,
        "plot_end": PLOT_END,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def bench_page(bench: RecordedBench, old: RecordedBench | None = None) -> str:
    from .render import environment

    return environment().get_template("bench.html.j2").render(**page_model(bench, old))
