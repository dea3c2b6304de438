"""The runner's closing line (``--error-format json``'s envelope, or the human line) is a line of
its own on stderr, whatever the child's echoed output left unterminated in the same file.

Each run is stopped by SIGTERM once the child's last bytes have come through the echo (107), so
the runner's line is the one written after them; both pumps, the native one's echo-only path
included (no capture: where it would move the bytes by splice).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess

import pytest
from conftest import SAFETY_NET, start_cli
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


# A writer fast enough to be served by the native pump's stay (csrc/stay.c), whose last piece is
# unterminated: the stay's drains after it find nothing, and its last echoed byte must outlast them.
LINES = 20000
FLOOD = (
    "import sys, time\n"
    f"for _ in range({LINES}): sys.stderr.write('x' * 76 + '\\n')\n"
    "sys.stderr.write('tail'); sys.stderr.flush(); time.sleep(120)"
)


@pytest.mark.parametrize("captured", [False, True], ids=["echo-only", "captured"])
def test_a_flood_of_lines_ending_unterminated_still_ends_apart(tmp_path, pump_backend, captured):
    """Captured, the native pump's stay waits on its hashing thread's read (a watched pipe), and
    its last drain reads nothing."""
    flood = ("x" * 76 + "\n") * LINES + "tail"
    options = ("--capture-dir", tmp_path / "cap") if captured else ()
    _, err = _stopped_once_seen(tmp_path, "json", "", flood, merged=False, child=FLOOD, options=options)
    assert err.startswith(flood.encode() + b"\n"), err[-200:]
    lines = err[len(flood) + 1 :].split(b"\n")
    assert len(lines) == 2 and lines[1] == b"", lines
    _closing("json", lines[0])
