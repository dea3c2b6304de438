"""A batch stopped while its stdout reader stalls still says its end on a live stderr: the
cancelled job's line, the jobs not started and the summary (the user's only record of which
jobs failed or were cancelled). The live output's one queue over both streams held those stderr
lines behind stdout's backlog, and the stop dropped them with it, the summary too
(docs/batch.md, "--show-output"). Process-level: the real CLI, real children, a real pipe nobody
reads until the batch exits; synchronised on a file the running job makes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

from conftest import SAFETY_NET, cli_command
from test_batch import write_manifest

CANCELLED = 107
BIG = 2_000_000  # many times a pipe's room: the block's rest waits in stdout's sink


def _stopped(tmp_path, first: dict, stalled: str, through_socket: bool = False, trace=None) -> None:
    """A batch of ``first`` then a job that runs until stopped, ``stalled`` (stdout or stderr)
    a pipe (or a socket) nobody reads and the other a file; stopped once the second job runs:
    its exit must be the stop's, within the test's bound. ``trace``: a ``--trace`` file, its
    directory removed before the stop (the batch's warning about it comes after its live output)."""
    flags = () if trace is None else ("--trace", str(trace))
    started = tmp_path / "bad-started"
    jobs = [
        first,
        {"id": "bad", "args": ["sh", "-c", f'touch "{started}"; sleep 60; exit 1']},
        {"id": "ok", "args": ["true"]},
    ]
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    if through_socket:
        read_sock, write_sock = socket.socketpair()
        read_end, write_end = read_sock.detach(), write_sock.detach()
    else:
        read_end, write_end = os.pipe()
    with open(tmp_path / "said", "wb") as said:
        streams = {"stdout": said, "stderr": said, stalled: write_end}
        proc = subprocess.Popen(
            cli_command() + ["batch", "-j", "1", "--show-output", "--out", str(tmp_path / "out"), *flags, manifest],
            stdin=subprocess.DEVNULL,
            **streams,
        )
    os.close(write_end)
    try:
        deadline = time.monotonic() + SAFETY_NET
        while not started.exists():  # the first job is done, its block waiting behind the stalled reader
            assert proc.poll() is None and time.monotonic() < deadline, "the second job never started"
            time.sleep(0.02)
        if trace is not None:
            trace.parent.rmdir()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=SAFETY_NET) == CANCELLED
    finally:
        os.close(read_end)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_stop_with_stdout_stalled_keeps_the_stderr_end(tmp_path):
    _stopped(tmp_path, {"id": "big", "args": ["head", "-c", str(BIG), "/dev/zero"]}, "stdout")
    lines = (tmp_path / "said").read_text().splitlines()
    assert lines[0].startswith("batch: big: exit 0"), lines
    assert any(line.startswith("batch: bad: cancelled") for line in lines), lines
    assert "batch: ok: not started, cancelled by SIGTERM" in lines, lines  # why, as the halt says its
    assert lines[-1] == "batch: 1 of 3 jobs exited 0, 1 cancelled, 1 not started, cancelled by SIGTERM", lines


def test_a_stop_with_stderr_stalled_still_ends(tmp_path):
    """The end's writes to a stderr nobody reads are bounded (the stall timeout), never a hang."""
    _stopped(tmp_path, {"id": "big", "args": ["sh", "-c", f"head -c {BIG} /dev/zero >&2"]}, "stderr")


def test_a_stop_with_stderr_a_stalled_socket_still_ends(tmp_path):
    """A socket has no private non-blocking description to write the end through (the pipe's
    ``/proc/self/fd`` reopen): the end's writes to its shared one are bounded all the same."""
    _stopped(
        tmp_path, {"id": "big", "args": ["sh", "-c", f"head -c {BIG} /dev/zero >&2"]}, "stderr", through_socket=True
    )


def test_a_stderr_given_up_by_the_stops_bounded_write_holds_no_later_line(tmp_path):
    """The stop's bounded write gave the stalled stderr up (``writeall``'s mark, as a run's echo
    stall sets it): the warning said after the live output closed (the ``--trace`` it cannot
    write) gets one write that does not wait, where it waited for the reader for ever."""
    trace = tmp_path / "gone" / "trace.json"
    trace.parent.mkdir()
    _stopped(tmp_path, {"id": "big", "args": ["sh", "-c", f"head -c {BIG} /dev/zero >&2"]}, "stderr", trace=trace)
