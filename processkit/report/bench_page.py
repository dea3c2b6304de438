"""A ``bench --export-json`` file as an HTML page: per command a box plot with every run as a
point, the runs in the order they ran (drift and warm-up show there), memory per command, and
the comparison. Geometry is computed here; the template (``bench.html.j2``) only places it.
"""

from __future__ import annotations

import datetime

from ..bounded import BENCH_EXPORT, InputError, NotJSON, WrongKind, load_file, read_start
from ..errors import Failure, Kind
from ..text import sanitize

WIDTH = 900
ROW = 34
LABEL = 200
PLOT = WIDTH - LABEL - 20


def is_bench_export(path: str) -> bool:
    """A JSON file written by ``bench --export-json``, or hyperfine's (not a JSONL stream). One
    over a bound (``bounded.BENCH_EXPORT``) counts as one, so that ``load`` says which."""
    try:
        if read_start(path, 1, BENCH_EXPORT) != b"{":
            return False
        data = load_file(path, BENCH_EXPORT)
    except (OSError, NotJSON, WrongKind):
        return False
    except InputError:
        return True
    results = data.get("results") if isinstance(data, dict) else None
    return isinstance(results, list) and all(isinstance(r, dict) and "times" in r for r in results)


def load(path: str) -> dict:
    """The export's JSON, read within ``bounded.BENCH_EXPORT`` (size, nesting, a regular file)."""
    try:
        data = load_file(path, BENCH_EXPORT)
    except OSError as exc:
        raise Failure(Kind.EVENTS_INVALID, f"cannot read the benchmark {sanitize(path)}: {exc.strerror}") from None
    except InputError as exc:
        raise Failure(Kind.EVENTS_INVALID, str(exc)) from None
    return data


def _scale(low: float, high: float):
    span = (high - low) or max(high, 1e-9)
    return lambda value: LABEL + PLOT * (value - low) / span


def _box(index: int, result: dict, x) -> dict:
    times = sorted(result["times"])
    n = len(times)

    def quantile(q: float) -> float:
        position = q * (n - 1)
        below = int(position)
        above = min(below + 1, n - 1)
        return times[below] + (times[above] - times[below]) * (position - below)

    y = 20 + index * ROW
    outliers = set(result.get("outliers", []))
    return {
        "name": result["command"],
        "y": y,
        "q1": x(quantile(0.25)),
        "q3": x(quantile(0.75)),
        "median": x(quantile(0.5)),
        "low": x(times[0]),
        "high": x(times[-1]),
        "points": [
            {"x": x(t), "y": y + ((i * 7) % 11) - 5, "outlier": i in outliers, "title": f"{t * 1e3:.3f} ms"}
            for i, t in enumerate(result["times"])
        ],
    }


def _ticks(low: float, high: float, x) -> list[dict]:
    return [
        {"x": x(low + (high - low) * i / 5), "label": f"{(low + (high - low) * i / 5) * 1e3:.2f} ms"} for i in range(6)
    ]


def _sequence(results: list[dict]) -> tuple[list[dict], int]:
    """Every run at its place in the benchmark's order, the warm-up runs first (hollow)."""
    height = 160
    width = max(len(results), 1)
    points = []  # (order, time, series, title, warm-up)
    for i, r in enumerate(results):
        warmups = [t for t in r.get("warmup_times") or [] if t is not None]
        for k, t in enumerate(warmups):  # interleaved rounds before order 0
            points.append(((k - len(warmups)) * width + i, t, i, f"{r['command']}: warm-up {k + 1}", True))
        for o, t in zip(r.get("order", range(len(r["times"]))), r["times"]):
            points.append((o, t, i, f"{r['command']}: run {o}", False))
    if not points:
        return [], height
    first, last = min(p[0] for p in points), max(p[0] for p in points)
    low, high = min(p[1] for p in points), max(p[1] for p in points)
    span = (high - low) or max(high, 1e-9)
    return [
        {
            "x": LABEL + PLOT * (o - first) / max(last - first, 1),
            "y": 10 + (height - 20) * (1 - (t - low) / span),
            "series": series,
            "title": f"{title}, {t * 1e3:.3f} ms",
            "warmup": warm,
        }
        for o, t, series, title, warm in points
    ], height


def page_model(data: dict) -> dict:
    results = [r for r in data["results"] if r.get("times")]
    every = [t for r in results for t in r["times"]]
    low, high = (min(every), max(every)) if every else (0.0, 1.0)
    x = _scale(low, high)
    boxes = [_box(i, r, x) for i, r in enumerate(results)]
    sequence, sequence_height = _sequence(results)
    peak = max((r.get("memory_max_byte") or 0 for r in results), default=0) or 1
    memory = [
        {
            "name": r["command"],
            "y": 10 + i * ROW,
            "mean": None if r.get("memory_mean_byte") is None else int(r["memory_mean_byte"]),
            "max": r.get("memory_max_byte"),
            "width": PLOT * (r.get("memory_mean_byte") or 0) / peak,
            "max_x": LABEL + PLOT * (r.get("memory_max_byte") or 0) / peak,
        }
        for i, r in enumerate(results)
    ]
    return {
        "settings": data.get("processkit") or {"order": "as hyperfine ran them", "cpus": None},
        "results": data["results"],
        "boxes": boxes,
        "ticks": _ticks(low, high, x),
        "box_height": 40 + len(boxes) * ROW,
        "sequence": sequence,
        "sequence_height": sequence_height,
        "memory": memory,
        "memory_height": 20 + len(memory) * ROW,
        "comparison": data.get("comparison"),
        "width": WIDTH,
        "label": LABEL,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def bench_page(data: dict) -> str:
    from .render import environment

    return environment().get_template("bench.html.j2").render(**page_model(data))
