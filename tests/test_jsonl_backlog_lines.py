"""A deferred jsonl stream's backlog (the API's runner service, a FIFO behind its reader): it goes
as soon as the reader makes room, not at the run's next event or end (the process-level case is
in test_api_jsonl_stalled.py), and in whole lines, each write atomic on a pipe, so streams
sharing one pipe never interleave inside a line and a stream that fails ends on a newline
(review of attack55b)."""

from __future__ import annotations

import json
import os

import pytest


@pytest.fixture(autouse=True)
def _pipes_taken_as_passed(monkeypatch):
    """Each stream here names this process's own pipe (``/proc/self/fd/N``), as a caller's
    descriptor handed to the CLI (``4>&1``) is named: taken as passed, never refused as the
    runner's own (``caller_fds.refuse_unpassed``)."""
    monkeypatch.setattr("processkit.caller_fds.unpassed", lambda dir_fd, name: None)


def _deferred(write_end: int, loop=None):
    from processkit.events.emitter import Emitter
    from processkit.loop import Loop

    return Emitter(f"/proc/self/fd/{write_end}", defer=loop if loop is not None else Loop())


def _exit(code: int):
    from processkit.events.types import RunnerExit

    return RunnerExit(code=0, source="child_exit", child_code=code)


def _read_all(read_end: int) -> bytes:
    data = bytearray()
    while True:
        try:
            chunk = os.read(read_end, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return bytes(data)


def _torn(data: bytes) -> list[bytes]:
    bad = []
    for line in data.split(b"\n")[:-1]:
        try:
            json.loads(line)
        except ValueError:
            bad.append(line)
    return bad


def test_two_deferred_streams_on_one_pipe_never_interleave_inside_a_line():
    read_end, write_end = os.pipe()
    first, second = _deferred(write_end), _deferred(write_end)
    os.close(write_end)
    os.set_blocking(read_end, False)
    data = bytearray()
    for number in range(3000):
        if number % 7 < 3:
            first.emit(_exit(number))
            second.emit(_exit(100000 + number))
        else:
            second.emit(_exit(100000 + number))
            first.emit(_exit(number))
        if number % 50 == 0:  # a slow reader: each backlog pushed into a pipe with a little room
            try:
                data += os.read(read_end, 10000)
            except BlockingIOError:
                pass
    while not (first.drained() & second.drained()):
        data += _read_all(read_end)
    first.close()
    second.close()
    data += _read_all(read_end)
    os.close(read_end)
    assert first.failure is None and second.failure is None
    assert data.endswith(b"\n") and not _torn(bytes(data))
    codes = [json.loads(line)["child_code"] for line in bytes(data).split(b"\n")[:-1]]
    assert [c for c in codes if c < 100000] == list(range(3000))
    assert [c - 100000 for c in codes if c >= 100000] == list(range(3000))


def test_a_deferred_stream_that_fails_ends_on_a_whole_line():
    from processkit.events.backlog import BACKLOG_MOST

    read_end, write_end = os.pipe()
    emitter = _deferred(write_end)
    os.close(write_end)
    os.set_blocking(read_end, False)
    emitted = 0
    for _ in range(1500):  # past what the pipe holds
        emitter.emit(_exit(emitted))
        emitted += 1
    taken = os.read(read_end, 10000)  # a little room, then the reader takes nothing more
    while emitter.writing:  # each push fills the room the reader made; then the bound fails it
        emitter.emit(_exit(emitted))
        emitted += 1
        assert emitted < 4 * BACKLOG_MOST // 50, "the backlog grew past its bound"
    emitter.close()
    data = taken + _read_all(read_end)
    os.close(read_end)
    assert emitter.failure == f"could not write a JSONL event: its reader fell more than {BACKLOG_MOST} bytes behind"
    assert data.endswith(b"\n"), data[-60:]
    assert not _torn(data)


def test_a_stream_closed_behind_its_stalled_reader_ends_on_a_whole_line(monkeypatch):
    """A run closed before it waited for its reader (its host failed) writes the backlog at
    close, waiting as the write does: in whole lines too, so the stall leaves no half line."""
    from processkit.events import emitter as module

    monkeypatch.setattr(module, "STALL_SECONDS", 0.2)  # the stall rule's wait, not its meaning
    read_end, write_end = os.pipe()
    emitter = _deferred(write_end)
    os.close(write_end)
    os.set_blocking(read_end, False)
    for number in range(1500):  # past what the pipe holds
        emitter.emit(_exit(number))
    taken = os.read(read_end, 10000)  # a little room, then the reader takes nothing more
    emitter.close()
    data = taken + _read_all(read_end)
    os.close(read_end)
    assert emitter.failure == "could not write a JSONL event: its reader took nothing for 0.2s"
    assert data.endswith(b"\n"), data[-60:]
    assert not _torn(data)


def test_a_line_longer_than_pipe_buf_goes_whole_and_alone():
    """A line past PIPE_BUF cannot be atomic: it is written on its own, its rest before the next."""
    import select

    from processkit.events.types import RunnerExit

    read_end, write_end = os.pipe()
    emitter = _deferred(write_end)
    os.close(write_end)
    os.set_blocking(read_end, False)
    long_source = "x" * (3 * select.PIPE_BUF)
    for number in range(400):
        if number % 40 == 0:
            emitter.emit(RunnerExit(code=0, source=long_source, child_code=number))
        else:
            emitter.emit(_exit(number))
    data = bytearray()
    while not emitter.drained():
        data += _read_all(read_end)
    emitter.close()
    data += _read_all(read_end)
    os.close(read_end)
    codes = [json.loads(line)["child_code"] for line in bytes(data).split(b"\n")[:-1]]
    assert codes == list(range(400))


def test_the_pipe_is_watched_on_the_loop_only_while_a_backlog_waits():
    """Registered when a backlog starts, pushed by the loop's turn when the reader makes room,
    and off the loop once empty (and at close, and when the stream fails)."""
    from processkit.loop import Loop

    loop = Loop()
    read_end, write_end = os.pipe()
    emitter = _deferred(write_end, loop)
    os.close(write_end)
    os.set_blocking(read_end, False)
    emitter.emit(_exit(0))
    assert not loop._handlers, "a stream its pipe takes at once is not watched"
    number = 1
    while emitter.drained():  # until the pipe is full and a backlog waits
        emitter.emit(_exit(number))
        number += 1
    assert loop._handlers, "a backlog waits: the pipe is watched for room"
    data = bytearray()
    while loop._handlers:
        data += _read_all(read_end)
        loop.run_once(1.0)  # the loop's turn pushes what waits (no event emitted)
    assert emitter.drained()
    data += _read_all(read_end)
    codes = [json.loads(line)["child_code"] for line in bytes(data).split(b"\n")[:-1]]
    assert codes == list(range(number))
    while emitter.drained():  # a backlog again, then the stream closed with it: off the loop
        emitter.emit(_exit(number))
        number += 1
    os.close(read_end)  # the reader gone: the close's write fails at once (EPIPE)
    emitter.close()
    assert not loop._handlers
    loop.close()
