"""``batch``'s live output queue (``cli/batch_output.py``) at its bound and with the batch's
warnings, on a real loop and real pipes whose reader stalls. The bound is PENDING_MOST items
(65,536): reaching it through the CLI takes tens of thousands of jobs, so it is lowered here.

Once an item is dropped for the full queue, everything later on its stream is dropped too, said
once: a reader that took one item used to let new items queue again after the warning, leaving
silent gaps. A ``--show-output`` header and its block are one item: a header is never shown
for a job whose block was dropped. A warning said while the loop turns (``diagnostics``) joins
the queue after what was written before it, never straight to a stderr whose reader stalls."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys

import pytest

from processkit import diagnostics
from processkit.cli import batch_output
from processkit.loop import Loop

STALL = 1 << 20  # more than the stdout pipe takes: what is left waits in its sink
BOUND = 4


class _Host:
    def __init__(self) -> None:
        self.loop = Loop()
        self.stop_source = None


def _pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETFL, fcntl.fcntl(read_end, fcntl.F_GETFL) | os.O_NONBLOCK)
    return read_end, write_end


def _taken(fd: int) -> bytes:
    """What the pipe holds now (its read end is non-blocking)."""
    got = b""
    with contextlib.suppress(BlockingIOError):
        while piece := os.read(fd, 1 << 16):
            got += piece
    return got


@pytest.fixture
def live(monkeypatch):
    monkeypatch.setattr(batch_output, "PENDING_MOST", BOUND)
    out_r, out_w = _pipe()
    err_r, err_w = _pipe()
    output = batch_output.LiveOutput(out_w, err_w)
    host = _Host()
    output.attach(host)
    output.route()  # as the batch routes its warnings (``cli/batch.py``)
    try:
        yield output, host, out_r, err_r, err_w
    finally:
        output.close()
        output.release()
        host.loop.close()
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)


def _read_out_until_done(output, host, out_r) -> bytes:
    """The stdout reader wakes and reads everything, the loop turning as a blocking write would wait."""
    got = bytearray()
    while output.stdout.waiting or output.stderr.waiting:
        got += _taken(out_r)
        host.loop.run_once(0.05)
    return bytes(got + _taken(out_r))


def test_a_drop_sticks_once_said(live):
    output, host, out_r, err_r, _ = live
    output.stdout.write(b"o" * STALL)  # stdout stalls: the stderr lines after it wait in the queue
    for number in range(BOUND + 2):
        output.stderr.write(b"line %d\n" % number)
    assert _taken(err_r) == b""  # in order: nothing of stderr before stdout's block is out
    assert len(_read_out_until_done(output, host, out_r)) == STALL
    output.stderr.write(b"later\n")  # the queue has room again: still dropped, not said again
    host.loop.run_once(0.05)
    said = _taken(err_r).decode()
    lines = said.splitlines()
    assert lines[:BOUND] == [f"line {number}" for number in range(BOUND)]
    assert len(lines) == BOUND + 1 and "nothing more of its stderr is shown" in lines[-1], said


def test_a_header_and_its_block_are_dropped_together(live, tmp_path):
    output, host, out_r, _, _ = live
    capture = tmp_path / "stdout.log"
    capture.write_bytes(b"body\n")
    output.stdout.write(b"o" * STALL)  # the sink fills: later stdout items wait in the queue
    while not output.stdout.sink.full:
        output.stdout.write(b"o" * STALL)
    for number in range(BOUND):
        output.stdout.write(b"kept %d\n" % number)
    output.stdout.copy(str(capture), b"==> job (exit 0) <==\n")  # finds the queue full
    said = _read_out_until_done(output, host, out_r).lstrip(b"o")
    assert said == b"".join(b"kept %d\n" % number for number in range(BOUND)), said


def test_a_warning_waits_its_turn_while_the_loop_turns(live, monkeypatch):
    output, host, out_r, err_r, err_w = live
    with os.fdopen(os.dup(err_w), "w") as stderr:
        monkeypatch.setattr(sys, "stderr", stderr)
        output.stdout.write(b"o" * STALL)
        output.stderr.write(b"batch: a: exit 0\n")
        diagnostics.warn("something")  # would block on a full stderr, and would jump the queue
        assert _taken(err_r) == b""
        assert len(_read_out_until_done(output, host, out_r)) == STALL
        assert _taken(err_r) == b"batch: a: exit 0\nprocesskit-cli: warning: something\n"
        output.close()  # the loop closed: warnings go straight to stderr again
        diagnostics.warn("after")
        assert _taken(err_r) == b"processkit-cli: warning: after\n"


def test_the_batch_end_after_a_drop_reaches_a_reader_that_caught_up(live):
    """The drop is the loop's bound: once the loop closed, the summary and the failure list
    written after it reach stderr's reader (a sticky drop used to silence them for good)."""
    output, host, out_r, err_r, _ = live
    output.stdout.write(b"o" * STALL)
    for number in range(BOUND + 2):  # the queue overflows: stderr's later lines dropped
        output.stderr.write(b"line %d\n" % number)
    assert len(_read_out_until_done(output, host, out_r)) == STALL
    output.drain(host)
    output.close()
    output.stderr.write(b"batch: 1 failed job:\nbatch: 1 of 2 jobs exited 0, 1 failed\n")
    lines = _taken(err_r).decode().splitlines()
    assert lines[-2:] == ["batch: 1 failed job:", "batch: 1 of 2 jobs exited 0, 1 failed"], lines
