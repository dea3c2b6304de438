"""How an output stream paces its reads (the "facts about pipes" rule in engine/streams.py).

A real pipe and a real loop, a stand-in for the run: a short drain makes the stream wait for the
pipe to fill; a wait that ends with the pipe nearly full, or that shows a writer fast enough to
half fill it in one wait, switches it to reading on every wakeup; a window of little output
switches it back. A wait that lasted long is judged by its rate, not by what it brought. Time passing is simulated
by moving the loop's clock, so nothing here depends on the machine's speed.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from processkit.engine import spawn, streams
from processkit.loop import Loop

from manual_clock import ManualClock

try:
    from processkit import _native
except ImportError:
    _native = None


@pytest.fixture(
    params=["python", pytest.param("native", marks=pytest.mark.skipif(_native is None, reason="not built"))]
)
def stream(request):
    clock = ManualClock()
    loop = Loop(clock=clock)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    seen = []
    run = SimpleNamespace(
        loop=loop,
        pump_backend=request.param,
        unpolled_pipes=False,
        spawn_backend=spawn.select_backend(),
        output_limit=None,
        saw_output=lambda s: seen.append(s.pump.seen),
    )
    output = streams.OutputStream(run, "stdout", read_fd, None, None)
    output.test_write_fd = write_fd
    output.test_seen = seen
    output.test_clock = clock
    yield output
    output.close()
    os.close(write_fd)
    loop.close()


def reading(stream) -> bool:
    return stream.fd in stream._loop._handlers


def fill(stream, size: int) -> None:
    data = b"x" * size
    while data:
        data = data[os.write(stream.test_write_fd, data) :]


def test_a_short_drain_waits_and_a_lone_line_is_read_at_once(stream):
    fill(stream, 100)
    stream._loop.run_once(0)
    assert stream.test_seen == [100]  # read on readiness, not after a wait
    assert stream._coalescing is not None and not reading(stream)
    assert not stream._fast


def wait_out(stream) -> None:
    """The stream's wait after a short drain passes (its timer is due): one turn reads."""
    stream.test_clock.advance(streams.COALESCE_SECONDS)
    stream._loop.run_once(0)
    assert stream._coalescing is None


def fill_nearly(stream) -> None:
    fill(stream, stream._nearly_full + 4096)


def test_a_wait_that_fills_the_pipe_switches_to_reading_on_every_wakeup(stream):
    fill(stream, 100)
    stream._loop.run_once(0)
    fill_nearly(stream)  # a writer that (nearly) filled the pipe within one wait
    wait_out(stream)
    assert stream._fast
    assert reading(stream) and stream._coalescing is None
    # Fast: even a short drain keeps reading on readiness instead of waiting.
    fill(stream, 100)
    stream._on_readable()
    assert reading(stream) and stream._coalescing is None


def test_a_quiet_window_switches_back_to_coalescing(stream):
    fill(stream, 100)
    stream._loop.run_once(0)
    fill_nearly(stream)
    wait_out(stream)
    assert stream._fast
    stream.test_clock.advance(streams.COALESCE_SECONDS * 10)  # a whole window passes with no output
    fill(stream, 100)
    stream._loop.run_once(0)
    assert not stream._fast
    assert stream._coalescing is not None and not reading(stream)


@pytest.mark.parametrize("late, fast", [(10, False), (0, True)], ids=["long-wait", "short-wait"])
def test_a_wait_is_judged_by_its_rate(stream, late, fast):
    """Half a pipe (not nearly full) after one nominal wait is a fast writer; after eleven, not."""
    fill(stream, 100)
    stream._loop.run_once(0)  # a short drain: the stream waits
    assert stream._coalescing is not None
    fill(stream, int(stream._fast_rate * streams.COALESCE_SECONDS) + 4096)
    stream.test_clock.advance(late * streams.COALESCE_SECONDS)  # the timer fired late
    wait_out(stream)
    assert stream._fast is fast


def test_a_wait_that_finds_the_pipe_empty_goes_back_to_readiness(stream):
    fill(stream, 100)
    stream._loop.run_once(0)
    wait_out(stream)
    assert reading(stream) and not stream._fast


def test_a_big_drain_never_waits(stream):
    fill(stream, streams.SHORT_DRAIN)
    stream._loop.run_once(0)
    assert reading(stream) and stream._coalescing is None
