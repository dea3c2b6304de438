"""``batch --show-output``'s stdout and stderr, read together (``2>&1 | cat``, a terminal), come
out in the order the batch wrote them: a job's stdout block whole, the line saying it was cut
below it, then its stderr block, the next job's line after. They are written on the batch's loop
(``cli/batch_output.py``) through one ordered queue over both streams: a stdout block larger
than one write takes (a pipe's 64 KiB, a terminal's few KiB) used to be overtaken by the stderr
lines queued after it (each stream had its own queue), splitting the block, and on a terminal the
bar was drawn inside it. Process-level: the real CLI, real jobs, a real pipe and a real pty."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios

from conftest import cli_command
from test_batch import write_manifest

A_BYTES = 300_000  # several writes' worth on a pipe (64 KiB) and many on a terminal
CAP = 100_000
JOBS = [
    {"id": "big", "args": ["sh", "-c", f"head -c {A_BYTES} /dev/zero | tr '\\0' a; echo; echo err1 >&2"]},
    {
        "id": "capped",
        "args": ["sh", "-c", f"head -c {A_BYTES} /dev/zero | tr '\\0' b; echo err2 >&2"],
        "capture_max_bytes": CAP,
    },
]
CUT = (
    b"batch: capped: stdout above (cut at capture_max_bytes: 97.7 KiB of 293 KiB kept: "
    b"the stream's last 195.3 KiB are not in the file (capture_keep head-tail keeps the end too))"
)


def _argv(tmp_path) -> list[str]:
    manifest = write_manifest(tmp_path / "m.jsonl", JOBS)  # -j 1: the jobs end in manifest order
    return cli_command() + ["batch", "-j", "1", "--show-output", "--out", str(tmp_path / "out"), manifest]


def test_a_pipe_gets_each_block_whole_and_in_order(tmp_path):
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(_argv(tmp_path), stdin=subprocess.DEVNULL, stdout=write_end, stderr=write_end)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:  # as `2>&1 | cat`: one pipe, read as it comes
        said = reader.read()
    assert proc.wait(timeout=60) == 0
    expected = re.compile(
        rb"batch: big: exit 0 in [0-9.]+ m?s\n==> big \(exit 0\) <==\n"
        + b"a" * A_BYTES
        + rb"\nerr1\nbatch: capped: exit 0 in [0-9.]+ m?s\n==> capped \(exit 0\) <==\n"
        + b"b" * CAP
        + b"\n"
        + re.escape(CUT)
        + rb"\nerr2\nbatch: 2 of 2 jobs exited 0\n"
    )
    assert expected.fullmatch(said), _short(said)


def test_a_terminal_gets_each_block_whole_with_no_bar_inside(tmp_path):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
    proc = subprocess.Popen(_argv(tmp_path), stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    said = bytearray()
    try:
        while True:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    piece = os.read(master, 1 << 16)
                except OSError:  # EIO: every writer of the terminal closed it
                    break
                if not piece:
                    break
                said += piece
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    said = bytes(said)  # the terminal's own newline is \r\n
    assert b"==> big (exit 0) <==\r\n" + b"a" * A_BYTES + b"\r\nerr1\r\n" in said, _short(said)
    assert b"==> capped (exit 0) <==\r\n" + b"b" * CAP + b"\r\n" + CUT + b"\r\nerr2\r\n" in said, _short(said)


def _short(data: bytes) -> bytes:
    """``data`` with each long run of one byte said as its count (an assertion's message)."""
    return re.sub(rb"(.)\1{50,}", lambda run: run.group(1) + b"*%d" % len(run.group(0)), data)


def test_under_keep_failed_a_passing_jobs_unkept_output_is_said_not_shown_empty(tmp_path):
    """``--keep failed`` writes no passing job's capture, so ``--show-output`` has nothing to
    show under its header: the empty block read as a job that printed nothing."""
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "quiet", "args": ["true"]}, JOBS[0]])
    argv = ["batch", "-j", "1", "--show-output", "--keep", "failed", "--out", str(tmp_path / "out"), manifest]
    proc = subprocess.run(cli_command() + argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert b"==> big (exit 0) <==\n" in proc.stdout and b"a" * 100 not in proc.stdout
    assert b"batch: big: its 293 KiB of stdout not kept (--keep failed)\n" in proc.stderr
    assert b"batch: big: its 5 B of stderr not kept (--keep failed)\n" in proc.stderr
    assert b"batch: quiet: its" not in proc.stderr, "a job that wrote nothing has nothing unkept"


def test_the_show_output_header_names_a_signal_as_the_jobs_line_does(tmp_path):
    """A CI log of ``--show-output``'s stdout said ``==> crash (exit 139) <==`` for a job a
    SIGSEGV killed, which reads as a program that exited 139, where the job's line (on stderr,
    apart in a CI's log) names the signal. The header names it too; a plain exit stays ``(exit N)``."""
    from conftest import run_cli

    manifest = write_manifest(
        tmp_path / "m.jsonl",
        [
            {"id": "crash", "args": ["sh", "-c", "echo before; kill -SEGV $$"]},
            {"id": "three", "args": ["sh", "-c", "echo out; exit 3"]},
        ],
    )
    done = run_cli("batch", "-j", "1", "--show-output", "--out", tmp_path / "out", manifest, cwd=tmp_path)
    assert done.returncode == 117, done.stderr
    assert (
        done.stdout == b"==> crash (killed by signal 11 (SIGSEGV), exit 139) <==\nbefore\n==> three (exit 3) <==\nout\n"
    )
