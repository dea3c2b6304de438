"""A FIFO named as a batch's input whose writer comes after the batch opened it, through the
real CLI beside the real ``parallel``: its lines are the jobs' arguments (or the manifest), as
parallel and ``cat`` wait for a FIFO's writer. Before, a FIFO read whole (a ``::::`` file after
the first source, the manifest, ``--dry-run``'s sources) had no writer yet, read as empty, and
the batch said ``no jobs in the manifest`` and exited 0: every job lost without a word.

The writer arrives once the reader waits for it: asleep in its open of the FIFO, or holding it
open and asleep in a poll or a read (``/proc/PID/wchan`` and ``/proc/PID/fd``): events, not a
sleep."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import cli_command

needs_parallel = pytest.mark.skipif(shutil.which("parallel") is None, reason="GNU parallel is not installed")


def _late_writer(fifo, data: bytes, reader: subprocess.Popen) -> None:
    """Write ``data`` into ``fifo`` once ``reader`` waits for it (below), or write nothing once it
    has ended (a reader that takes a writerless FIFO for an empty one ends before any writer
    comes, every time: the writer never holds the FIFO open before that)."""
    while not _waits_for_a_writer(reader.pid, os.fspath(fifo)):
        if reader.poll() is not None:
            return
        time.sleep(0.005)
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # a reader has it: no ENXIO
    try:
        os.set_blocking(fd, True)
        os.write(fd, data)
    finally:
        os.close(fd)


def _waits_for_a_writer(pid: int, fifo: str) -> bool:
    """``pid`` asleep in its open of a FIFO (parallel's blocking open), or holding ``fifo`` open
    and asleep in a poll or a read (its ``/proc/PID/wchan``)."""
    try:
        with open(f"/proc/{pid}/wchan") as wchan:
            where = wchan.read()
        if "wait_for_partner" in where:
            return True
        if "poll" not in where and "pipe_read" not in where:
            return False
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == fifo for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def _fed(command: list, fifo, data: bytes) -> subprocess.CompletedProcess:
    reader = subprocess.Popen([str(word) for word in command], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _late_writer(fifo, data, reader)
    stdout, stderr = reader.communicate(timeout=120)
    return subprocess.CompletedProcess(reader.args, reader.returncode, stdout, stderr)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _args(out) -> list[list[str]]:
    return sorted(line["command"] for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines()))


def test_a_later_sources_fifo_waits_for_its_writer(tmp_path, fifo):
    (tmp_path / "a").write_text("1\n2\n")
    out = tmp_path / "out"
    done = _fed([*cli_command(), "batch", "--out", out, "--", "echo", "::::", tmp_path / "a", fifo], fifo, b"x\ny\n")
    assert done.returncode == 0, done.stderr
    assert _args(out) == [["echo", a, b] for a in "12" for b in "xy"], done.stderr


@needs_parallel
def test_a_later_sources_fifo_matches_gnu_parallel(tmp_path, fifo):
    (tmp_path / "a").write_text("1\n2\n")
    peer = _fed(["parallel", "--will-cite", "-k", "echo", "::::", tmp_path / "a", fifo], fifo, b"x\ny\n")
    assert peer.returncode == 0, peer.stderr
    assert peer.stdout.decode().splitlines() == [f"{a} {b}" for a in "12" for b in "xy"]


def test_a_manifest_fifo_waits_for_its_writer(tmp_path, fifo):
    out = tmp_path / "out"
    done = _fed([*cli_command(), "batch", fifo, "--out", out], fifo, b'{"id": "one", "args": ["true"]}\n')
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines()[-1] == "batch: 1 of 1 jobs exited 0"


def test_a_dry_runs_fifo_waits_for_its_writer(tmp_path, fifo):
    done = _fed([*cli_command(), "batch", "--dry-run", "--", "echo", "::::", fifo], fifo, b"x\n")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["args"] for line in done.stdout.splitlines()] == [["echo", "x"]]


def test_a_fifo_whose_writer_writes_nothing_is_an_empty_source(tmp_path, fifo):
    """A writer that came and closed with nothing written: the end of an empty source, no wait."""
    done = _fed([*cli_command(), "batch", "--out", tmp_path / "out", "--", "echo", ":::", "q", "::::", fifo], fifo, b"")
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines()[-1] == "batch: no jobs in the manifest"
