"""A command's ``Benchmark N:`` line is on stdout as its steps begin, as hyperfine prints it, not
with its figures once its runs are over: a CI log (a pipe, a file) shows which command runs, and
a stop amid it leaves that line, its own line on stderr naming the command too. Each command here
blocks on a FIFO the test writes to only once it has read the header from bench's stdout pipe."""

from __future__ import annotations

import os
import select
import signal
import time

import pytest

from conftest import SAFETY_NET, start_cli

HANGS = ["-n", "waits", "--command", '["head", "-n", "1", "go"]']  # until the test writes a line to go


def _until(fd: int, wanted: bytes) -> bytes:
    """What bench's stdout holds once it ends with ``wanted`` (or within SAFETY_NET: what it held)."""
    seen, deadline = b"", time.monotonic() + SAFETY_NET
    while not seen.endswith(wanted) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            break
        seen += chunk
    return seen


@pytest.fixture
def go(tmp_path):
    """The FIFO each run reads one line from, held open here for reading and writing, so neither
    the runs' open nor the test's write waits on the other; closed once the test is done."""
    os.mkfifo(tmp_path / "go")
    fd = os.open(tmp_path / "go", os.O_RDWR)
    yield fd
    os.close(fd)


@pytest.mark.parametrize(
    ("given", "before"),
    [
        (("--order", "sequential", "-n", "quick", "true"), b"Benchmark 1: quick\n  Time (abs"),  # its block first
        ((), b""),  # interleaved order's only command: it runs in a row too
    ],
)
def test_the_header_is_out_while_the_command_runs(tmp_path, go, given, before):
    bench = start_cli("bench", "-N", "--runs", "1", *given, *HANGS, cwd=tmp_path)
    try:
        header = b"Benchmark %d: waits\n" % (2 if given else 1)
        shown = _until(bench.stdout.fileno(), header)
        os.write(go, b"go\n")  # released only once the header is read
        rest, stderr = bench.communicate(timeout=SAFETY_NET)
    finally:
        bench.kill()
        bench.wait()
    assert shown.endswith(header) and before in shown, shown
    assert bench.returncode == 0, stderr
    assert b"Benchmark" not in rest and rest.startswith(b"  Time (abs \xe2\x89\xa1):"), rest


def test_a_stop_amid_a_command_leaves_its_header_and_names_it(tmp_path, go):
    bench = start_cli("bench", "-N", "--runs", "1", "--order", "sequential", *HANGS, cwd=tmp_path)
    try:
        shown = _until(bench.stdout.fileno(), b"Benchmark 1: waits\n")
        bench.send_signal(signal.SIGINT)
        rest, stderr = bench.communicate(timeout=SAFETY_NET)
    finally:
        bench.kill()
        bench.wait()
    assert bench.returncode == -signal.SIGINT, stderr
    assert shown + rest == b"Benchmark 1: waits\n", shown + rest
    said = stderr.decode().splitlines()
    assert said[-1].startswith("processkit-cli: benchmark stopped during 'waits'"), said
