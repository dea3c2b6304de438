"""A line longer than PIPE_BUF waits for its pipe to empty only ``most`` seconds (half the
stall). Past it, it went only at a look that itself saw the pipe's bytes drop, so a reader whose
co-writers keep its pipe full (few looks see a drop) could be failed as stalled while it read
(review of mend56j). It now goes at any look past the bound once its reader was seen taking
since the line began to wait, or once the pipe has free bytes for all of it; a reader seen
taking nothing, with no room for the line, still keeps it waiting (never cut)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest


@pytest.fixture
def clock(monkeypatch):
    from processkit.events import pipe_room

    now = [1000.0]
    monkeypatch.setattr(pipe_room, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return now


@pytest.fixture
def watched(clock):
    """A ``Watch`` (its bound 1 s) of a pipe made to hold ``held`` bytes, and the pipe's read end."""
    from processkit.events.pipe_room import Watch

    made: list[int] = []

    def make(held: int):
        read_end, write_end = os.pipe()
        made.extend((read_end, write_end))
        os.write(write_end, b"x" * held)
        return Watch(None, write_end, lambda: None, 1.0), read_end  # type: ignore[arg-type]

    yield make
    for fd in made:
        os.close(fd)


def test_past_its_bound_a_line_goes_at_any_look_once_its_reader_took(clock, watched):
    watch, read_end = watched(40000)
    assert watch.waits(40000)  # the pipe holds bytes: the line waits
    os.read(read_end, 100)
    clock[0] += 0.5
    assert watch.waits(40000)  # a drop seen, but within the bound
    clock[0] += 1.0
    assert not watch.waits(40000)  # past it, no drop at this look: its reader took before
    assert watch.held == -1


def test_past_its_bound_a_line_goes_into_a_pipe_with_room_for_it(clock, watched):
    watch, _ = watched(100)
    assert watch.waits(40000)
    clock[0] += 1.5
    assert not watch.waits(40000)  # no drop ever seen, but room for all of it


def test_a_line_with_no_room_and_a_reader_seen_taking_nothing_waits(clock, watched):
    watch, _ = watched(40000)
    assert watch.waits(40000)
    clock[0] += 5.0
    assert watch.waits(40000)  # the stall rule fails it (``backlog.push``), uncut


def test_the_bound_is_shorter_than_the_stall():
    from processkit.events import backlog
    from processkit.loop import Loop

    read_end, write_end = os.pipe()
    emitter = SimpleNamespace(_watch=None, _defer=Loop(), _fd=write_end, drained=lambda: True)
    try:
        assert backlog.room(emitter, 2.0)._most <= 1.0
    finally:
        os.close(read_end)
        os.close(write_end)
