"""The loop's timers against a clock the test moves: due at or before ``now``, in order,
never after a cancel, and measured from the turn's ``now`` (``call_later`` does not refresh it
mid-turn, so the callbacks of one turn agree on the time)."""

from __future__ import annotations

import os

from processkit.loop import Loop

from manual_clock import ManualClock


def test_timers_fire_when_the_clock_reaches_them_in_order():
    clock = ManualClock()
    loop = Loop(clock=clock)
    fired = []
    loop.call_later(2, lambda: fired.append("b"))
    loop.call_later(1, lambda: fired.append("a"))
    cancelled = loop.call_later(1.5, lambda: fired.append("never"))
    cancelled.cancel()
    loop.run_once(0)
    assert fired == []
    clock.advance(1)
    loop.run_once(0)
    assert fired == ["a"]
    clock.advance(5)
    loop.run_once(0)
    assert fired == ["a", "b"]
    loop.close()


def test_call_later_measures_from_the_turns_now_not_a_fresh_clock():
    clock = ManualClock()
    loop = Loop(clock=clock)
    read_fd, write_fd = os.pipe()
    scheduled = []

    def on_readable():
        os.read(read_fd, 10)
        clock.advance(3)  # the callback took long: the turn's now stays where it was
        scheduled.append(loop.call_later(1, lambda: None).when)

    loop.add_reader(read_fd, on_readable)
    os.write(write_fd, b"x")
    loop.run_once(0)
    assert scheduled == [1000.0 + 1]
    assert loop.now == 1000.0
    loop.close()
    os.close(read_fd)
    os.close(write_fd)


def test_run_until_honours_a_deadline_on_the_loops_clock():
    clock = ManualClock()
    loop = Loop(clock=clock)
    ticks = []

    def tick():
        ticks.append(loop.now)
        clock.advance(1)
        loop.call_later(1, tick)

    loop.call_later(0, tick)
    assert loop.run_until(lambda: False, deadline=clock() + 3) is False
    assert ticks == [1000.0, 1001.0, 1002.0]
    loop.close()


def test_cancelled_timers_leave_the_heap_once_they_are_most_of_it():
    """A batch cancels each job's overall timeout as the job ends: far-off cancelled timers must
    not pile up in the heap until their time comes (it stays within about twice the live ones)."""
    clock = ManualClock()
    loop = Loop(clock=clock)
    live = [loop.call_later(3600 + n, lambda: None) for n in range(10)]
    for _ in range(10_000):
        loop.call_later(3600, lambda: None).cancel()  # a job's timeout, cancelled as it ends
    assert loop.timers_held < 2 * 100
    fired = []
    keep = loop.call_later(1, lambda: fired.append("kept"))
    for _ in range(500):
        loop.call_later(2, lambda: fired.append("never")).cancel()
    clock.advance(3)
    loop.run_once(0)
    assert fired == ["kept"] and not keep.cancelled
    assert loop.timers_held <= len(live) + 100
    loop.close()
