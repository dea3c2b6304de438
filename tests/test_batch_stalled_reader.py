"""``batch --show-output`` whose stdout reader stalls (a pipe nobody reads yet, blocking or made
non-blocking by whoever shares it): the batch's loop is never held by it. A job's deadline still
fires while the reader takes nothing, and a stop signal ends the batch promptly; a reader that
reads late still gets every byte. The loop used to wait in the write (a blocking one, or the
poll that waited out a non-blocking pipe's EAGAIN): the timed-out job was recorded only once
the reader read, and SIGTERM was only noted. Process-level: the real CLI, real children, a
real pipe; synchronised on the summary's lines, never on sleeps."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import SAFETY_NET, cli_command
from test_batch import write_manifest

CANCELLED = 107
BATCH_FAILED = 117
BIG = 1_000_000  # many times a pipe's room: the batch's first write of it fills the pipe
JOBS = [
    {"id": "big", "args": ["head", "-c", str(BIG), "/dev/zero"]},
    {"id": "slow", "args": ["sleep", "60"], "timeout": "2s"},
]


def recorded(out, job: str, proc, within: float = SAFETY_NET) -> dict:
    """``job``'s summary line once the batch wrote it (fails after ``within`` seconds)."""
    deadline = time.monotonic() + within
    path = out / "summary.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists():
            for text in path.read_text().splitlines():
                if text.endswith("}") and json.loads(text)["id"] == job:
                    return json.loads(text)
        time.sleep(0.05)
    raise AssertionError(f"{job} not recorded within {within}s while stdout's reader stalled")


def batch_into_pipe(write_end: int, stderr_path, *options: str, cwd=None) -> subprocess.Popen:
    """A ``batch --show-output`` whose stdout is ``write_end`` (closed here once the batch holds
    it) and whose stderr goes to ``stderr_path``."""
    with open(stderr_path, "wb") as said:
        proc = subprocess.Popen(
            cli_command() + ["batch", "--show-output", *options],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=said,
            cwd=cwd,
        )
    os.close(write_end)
    return proc


@pytest.mark.parametrize("ending", ["sigterm", "late-reader"])
@pytest.mark.parametrize("pipe", ["blocking", "nonblocking"])
def test_a_stalled_stdout_reader_holds_no_deadline_and_no_signal(tmp_path, pipe, ending):
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", JOBS)
    read_end, write_end = os.pipe()
    if pipe == "nonblocking":  # as a Node.js or CI parent sharing the pipe leaves it
        fcntl.fcntl(write_end, fcntl.F_SETFL, fcntl.fcntl(write_end, fcntl.F_GETFL) | os.O_NONBLOCK)
    proc = batch_into_pipe(write_end, tmp_path / "stderr", "-j", "2", "--out", str(out), manifest)
    try:
        line = recorded(out, "slow", proc)  # nobody has read a byte of stdout yet
        assert (line["exit_code"], line["source"]) == (106, "timeout")
        assert recorded(out, "big", proc)["exit_code"] == 0
        if ending == "sigterm":
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=SAFETY_NET) == CANCELLED
            return
        taken = bytearray()
        with os.fdopen(read_end, "rb", buffering=0) as reader:
            read_end = -1
            while piece := reader.read(1 << 16):
                taken += piece
        assert proc.wait(timeout=SAFETY_NET) == BATCH_FAILED
        expected = b"==> big (exit 0) <==\n" + b"\0" * BIG + b"\n" + b"==> slow (timed out (exit 106)) <==\n"
        assert (len(taken), bytes(taken) == expected) == (len(expected), True)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if read_end >= 0:
            os.close(read_end)
