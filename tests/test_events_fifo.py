"""``events --file FIFO``: a FIFO no process opens for writing waited for ever (no poll wakes a
reader for a writer that never came). It now waits FIFO_WRITER_SECONDS for its first writer, then
reads as an empty stream and says so (``FIFO_WRITER_SECONDS``, 5 s); a run that opens it meanwhile is read whole."""

from __future__ import annotations

import os
import subprocess

from conftest import run_cli, start_cli
from streams import wait_until

MODES = ([], ["--json"], ["--follow"], ["--validate"])


def test_a_fifo_no_one_writes_is_an_empty_stream_said_not_a_wait_for_ever(tmp_path):
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    readers = [start_cli("events", *mode, "--file", fifo) for mode in MODES]
    for mode, reader in zip(MODES, readers):
        try:
            out, err = reader.communicate(timeout=40)  # the wait is 5 s
        except subprocess.TimeoutExpired:
            for started in readers:
                started.kill()
                started.wait()
            raise AssertionError(f"events {mode} --file FIFO still waits for a writer") from None
        assert reader.returncode == 0, (mode, err)
        said = f"processkit-cli: note: no process opened the FIFO `{fifo}` for writing within 5 s: nothing to read"
        assert said.encode() in err, (mode, err)
        assert b"runner_exit" not in out


def test_a_run_that_opens_the_fifo_after_its_reader_is_read_whole(tmp_path):
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    reader = start_cli("events", "--json", "--file", fifo)
    try:
        # the reader has the FIFO open: the run may start (it refuses a FIFO no one reads)
        wait_until(lambda: any(os.path.realpath(f"/proc/{reader.pid}/fd/{fd}") == str(fifo) for fd in _fds(reader.pid)),
                   timeout=60, what="the reader's open")  # fmt: skip
        done = run_cli("run", "--jsonl", fifo, "--", "true")
        out, err = reader.communicate(timeout=60)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert done.returncode == 0, done.stderr
    assert reader.returncode == 0 and b"note" not in err, err
    lines = out.splitlines()
    assert b'"event":"run_started"' in lines[0] and b'"event":"runner_exit"' in lines[-1]


def _fds(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return []
