"""The bench page's axes (report/axes.py): for any range of times, bytes or run numbers a file
can hold, a handful of ticks at one round 1-2-5 step that cover the data, drawn inside the plot."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from processkit.report import axes

FINITE = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)


@given(a=FINITE, b=FINITE, count=st.integers(min_value=2, max_value=10))
def test_ticks_cover_the_data_at_one_round_step_inside_the_plot(a, b, count):
    low, high = min(a, b), max(a, b)
    axis = axes.Axis(low, high, 200, 860, axes.time_unit(high), count=count)
    assert 2 <= len(axis.ticks) <= count + 3
    assert axis.low <= low and axis.high >= high
    assert all(200 - 1e-6 <= x <= 860 + 1e-6 for x, _ in axis.ticks)
    assert 200 - 1e-6 <= axis.at(low) <= axis.at(high) <= 860 + 1e-6
    step = (axis.high - axis.low) / (len(axis.ticks) - 1)
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert min(abs(mantissa - m) for m in (1, 2, 5, 10)) < 1e-6 * 10
    labels = [label for _, label in axis.ticks]
    assert len(set(labels)) == len(labels)  # the decimals the step needs, no more, no fewer


def test_the_figures_have_hyperfines_precision():
    assert axes.spread(0.262594, 0.019906) == "262.6 ± 19.9 ms"
    assert axes.spread(1.3401, 0.0551) == "1.340 ± 0.055 s"
    assert axes.spread(0.0004396, None) == "439.6 µs"
    assert axes.span(0.0001808, 0.0010948, axes.time_unit(0.0004396)) == "180.8 … 1094.8 µs"
    assert axes.size(583816.5) == "570 KiB" and axes.size(5 << 20) == "5.0 MiB" and axes.size(512) == "512 B"
    ticks = axes.Axis(0, 5 << 20, 200, 680, axes.byte_unit(5 << 20), count=5).ticks
    assert [label for _, label in ticks] == ["0 MiB", "2 MiB", "4 MiB", "6 MiB"]
