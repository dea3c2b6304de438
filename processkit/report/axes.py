"""Axes a reader can take in at a glance: ticks at round 1-2-5 steps, labels in one unit with
only the decimals the step needs, and figures at the precision hyperfine prints them.
"""

from __future__ import annotations

import math

TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
BYTE_UNITS = (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024), ("B", 1))


class Axis:
    """A linear axis over ``low`` .. ``high`` (data units) drawn from ``start`` to ``end`` (SVG
    units). ``ticks`` are (position, label) at a round step of ``unit`` (a name and its size in
    data units: ms, KiB), the range widened to whole steps."""

    def __init__(self, low: float, high: float, start: float, end: float, unit: tuple[str, float], *, count: int = 6):
        name, size = unit
        raw = (high - low) / max(count - 1, 1) if high > low else abs(high) or size
        raw = max(raw, max(abs(low), abs(high)) * 1e-9)  # a step a float can still add
        step = max(nice_step(raw / size), 1e-3) * size  # no finer than a thousandth of the unit
        if name == "":  # counts: whole steps
            step = max(step, 1.0)
        self.low = math.floor(low / step) * step
        self.high = max(math.ceil(high / step) * step, self.low + step)
        self.start, self.end = start, end
        decimals = _decimals(step / size)
        suffix = f" {name}" if name else ""
        self.values = [self.low + step * i for i in range(round((self.high - self.low) / step) + 1)]
        if name:
            self.ticks = [(self.at(value), f"{value / size:.{decimals}f}{suffix}") for value in self.values]
        else:
            self.ticks = [(self.at(value), _compact(value)) for value in self.values]

    def at(self, value: float) -> float:
        return self.start + (self.end - self.start) * (value - self.low) / (self.high - self.low)


def _compact(count: float) -> str:
    """A whole number as a short label: ``400``, ``20k``, ``1.2M``."""
    for size, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(count) >= size:
            return f"{count / (1e3 if suffix == 'k' else size):g}{suffix}"
    return f"{count:.0f}"


def nice_step(raw: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at least ``raw``."""
    if not raw > 0 or not math.isfinite(raw):
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit in which ``seconds`` reads as 1 to 999 (hyperfine's choice)."""
    return next(((name, size) for name, size in TIME_UNITS if seconds >= size), TIME_UNITS[-2])


def byte_unit(count: float) -> tuple[str, float]:
    return next(((name, size) for name, size in BYTE_UNITS if count >= size), BYTE_UNITS[-1])


def _decimals(step: float) -> int:
    return max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 0


COUNT = ("", 1.0)  # an axis of whole numbers (runs), without a unit


def duration(seconds: float | None, unit: tuple[str, float] | None = None) -> str:
    """A time as hyperfine prints it: ``262.6 ms``, ``1.234 s``, ``439.6 µs``."""
    if seconds is None:
        return "—"
    name, size = unit or time_unit(seconds)
    return f"{seconds / size:.{3 if name == 's' else 1}f} {name}"


def spread(mean: float | None, stddev: float | None) -> str:
    """``262.6 ± 19.9 ms``: both in the mean's unit, written once."""
    if mean is None:
        return "—"
    unit = time_unit(mean)
    return duration(mean, unit) if stddev is None else _pair(mean, " ± ", stddev, unit)


def span(low: float, high: float, unit: tuple[str, float]) -> str:
    """``249.4 … 257.9 ms``."""
    return _pair(low, " … ", high, unit)


def _pair(first: float, between: str, second: float, unit: tuple[str, float]) -> str:
    number, name = duration(first, unit).rsplit(" ", 1)
    return f"{number}{between}{duration(second, unit)}"


def size(count: float | None) -> str:
    """``570 KiB``, ``1.5 MiB``: three significant figures at most."""
    if count is None:
        return "—"
    name, unit = byte_unit(count)
    value = count / unit
    return f"{value:.{0 if value >= 100 or name == 'B' else 1}f} {name}"
