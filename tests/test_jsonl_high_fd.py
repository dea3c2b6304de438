"""A jsonl stream on a descriptor past 1024 (a batch's or the API service's, whose numbers run
high under a raised open-file limit) whose reader lags: its wait for the pipe used
``select.select``, which refuses such a number with ValueError, and that escaped the emitter's
``except OSError`` (review of mend56j). It now polls: the stalled reader fails the stream as
on any descriptor."""

from __future__ import annotations

import fcntl
import os
import resource

import pytest

HIGH = 1100


@pytest.fixture
def high_pipe(monkeypatch):
    """A pipe with its write end at descriptor ``HIGH``, full, and no reader reading it."""
    from processkit.events import emitter as module

    monkeypatch.setattr(module, "STALL_SECONDS", 0.2)  # the stall rule's wait, not its meaning
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= HIGH:
        pytest.skip(f"the open-file limit's hard bound ({hard}) is below {HIGH + 1}")
    if soft != resource.RLIM_INFINITY and soft <= HIGH:
        resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH + 1, hard))
    read_end, write_end = os.pipe()
    os.dup2(write_end, HIGH)
    os.close(write_end)
    os.set_blocking(HIGH, False)
    os.write(HIGH, b"x" * fcntl.fcntl(HIGH, fcntl.F_GETPIPE_SZ))  # full: the next write takes nothing
    try:
        yield HIGH
    finally:
        os.close(HIGH)
        os.close(read_end)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _exit():
    from processkit.events.types import RunnerExit

    return RunnerExit(code=0, source="child_exit", child_code=0)


def test_a_stream_written_alone_fails_as_stalled_past_fd_1024(high_pipe):
    from processkit.events.emitter import Emitter

    emitter = Emitter("unused", fd=high_pipe, lent=True)  # gathered, written at close: the rest waits there
    emitter.emit(_exit())
    emitter.close()
    assert emitter.failure == "could not write a JSONL event: its reader took nothing for 0.2s"


def test_a_deferred_stream_closed_with_a_backlog_fails_as_stalled_past_fd_1024(high_pipe):
    from processkit.events.emitter import Emitter
    from processkit.loop import Loop

    emitter = Emitter("unused", fd=high_pipe, lent=True, defer=Loop())
    emitter.emit(_exit())
    emitter.close()  # the backlog waits for the pipe outside the loop (``finish``)
    assert emitter.failure == "could not write a JSONL event: its reader took nothing for 0.2s"
