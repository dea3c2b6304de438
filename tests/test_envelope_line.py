"""The runner's closing line (``--error-format json``'s envelope, or the human line) is a line of
its own on stderr, whatever the child's echoed output left unterminated in the same file.

Each run is stopped by SIGTERM once the child's last bytes have come through the echo (107), or
as many as the echo took, so the runner's line is the one written after them; both pumps, the native one's echo-only path
included (no capture: where it would move the bytes by splice).
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess

import pytest
from conftest import SAFETY_NET, start_cli, wait_for_event, wait_for_file
from streams import python_child

# The child writes its pieces, flushed, then waits to be stopped.
CHILD = "import sys, time; sys.stdout.write({out!r}); sys.stdout.flush(); sys.stderr.write({err!r}); sys.stderr.flush(); time.sleep(120)"


def _stopped_once_seen(
    tmp_path, fmt: str, out: str, err: str, merged: bool, child: str = CHILD, options: tuple = ()
) -> tuple[bytes, bytes]:
    """Runs the child, waits until its stderr piece (or, merged into one file, its two pieces)
    came through the echo, stops the runner with SIGTERM; returns its stdout and stderr."""
    runner = start_cli(
        "--error-format",
        fmt,
        "run",
        "--jsonl",
        tmp_path / "run.jsonl",
        *options,
        "--",
        *python_child(child.format(out=out, err=err)),
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
    )
    watched = runner.stdout if merged else runner.stderr
    assert watched is not None
    expected = (out + err if merged else err).encode()
    seen = b""
    while len(seen) < len(expected):
        ready, _, _ = select.select([watched], [], [], SAFETY_NET)
        assert ready, f"the child's output never came through the echo: {seen[-80:]!r}"
        piece = os.read(watched.fileno(), len(expected) - len(seen))
        assert piece, f"the runner's output ended early: {seen[-80:]!r}"
        seen += piece
    runner.send_signal(signal.SIGTERM)
    rest_out, rest_err = runner.communicate(timeout=SAFETY_NET)
    assert runner.returncode == 107
    if merged:
        return seen + rest_out, b""
    return rest_out, seen + rest_err


def _closing(fmt: str, line: bytes) -> None:
    if fmt == "json":
        envelope = json.loads(line)
        assert (envelope["code"], envelope["kind"]) == (107, "cancelled")
    else:
        assert line.startswith(b"processkit-cli: run cancelled"), line


@pytest.mark.parametrize("fmt", ["json", "human"])
def test_the_closing_line_starts_its_own_line_after_an_unterminated_stderr(tmp_path, pump_backend, fmt):
    out, err = _stopped_once_seen(tmp_path, fmt, "", "progress 42%", merged=False)
    assert out == b""
    assert err.startswith(b"progress 42%\n"), err
    lines = err.split(b"\n")
    assert len(lines) == 3 and lines[2] == b"", err  # the child's piece, the runner's line, its newline
    _closing(fmt, lines[1])


def test_a_terminated_stderr_gets_no_empty_line_and_another_files_open_line_none(tmp_path, pump_backend):
    out, err = _stopped_once_seen(tmp_path, "json", "stdout left open", "done\n", merged=False)
    assert out == b"stdout left open"
    lines = err.split(b"\n")
    assert lines[0] == b"done" and len(lines) == 3 and lines[2] == b"", err
    _closing("json", lines[1])


def test_a_stdout_in_the_same_file_as_stderr_counts_as_stderr(tmp_path, pump_backend):
    both, _ = _stopped_once_seen(tmp_path, "json", "compiling", "", merged=True)  # 2>&1
    assert both.startswith(b"compiling\n"), both
    lines = both.split(b"\n")
    assert len(lines) == 3 and lines[2] == b"", both
    _closing("json", lines[1])


# The child writes 10,010 bytes of whole lines in one write, says so, then waits to be stopped.
LINES_CHILD = (
    "import os, sys, time; os.write(2, (b'x' * 76 + b'\\n') * 130); open(sys.argv[1], 'w').close(); time.sleep(120)"
)


def test_the_last_byte_told_is_the_last_one_the_stderr_took(tmp_path, pump_backend):
    """An echo that takes part of a chunk tells the last byte it wrote, not the chunk's: a stderr
    pipe shrunk to one page (4,096 bytes), read only once the runner gave up the rest (a second
    SIGTERM in its teardown) and said ``runner_exit``, takes the first 4,096 bytes of the child's
    whole lines, a cut in the middle of its 54th, and the envelope starts a line of its own after
    it (the rule before: the chunk's last byte, a newline, so the envelope was glued onto the cut
    line). Both pumps: each writes the chunk whole and queues what the pipe did not take."""
    said = tmp_path / "said"
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 4096)
    try:
        runner = start_cli(
            "--error-format",
            "json",
            "run",
            "--jsonl",
            tmp_path / "run.jsonl",
            "--",
            *python_child(LINES_CHILD),
            said,
            stderr=write_fd,
        )
    finally:
        os.close(write_fd)
    with os.fdopen(read_fd, "rb") as err:
        wait_for_file(said)
        runner.send_signal(signal.SIGTERM)
        wait_for_event(tmp_path / "run.jsonl", "cleanup_started")
        runner.send_signal(signal.SIGTERM)  # in the teardown: the echo's backlog given up at once
        wait_for_event(tmp_path / "run.jsonl", "runner_exit")  # before the envelope, which waits for room
        seen = err.read()
    assert runner.wait(SAFETY_NET) == 107
    assert seen[:4097] == (b"x" * 76 + b"\n") * 53 + b"x" * 15 + b"\n", seen[4000:4200]
    _closing("json", seen[4097:].rstrip(b"\n"))
