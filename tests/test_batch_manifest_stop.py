"""A stop while ``batch -`` reads its manifest from a pipe whose writer is slow: Ctrl-C exited
107 with not a word (docs/exit-codes.md: a batch stopped by Ctrl-C dies by SIGINT, 130 in a
shell), and SIGTERM or SIGHUP killed it by the signal (143, 129) where a batch exits 107. The
whole read is now a batch's stop, as a FIFO's wait for its writer was: the closing line, the
batch's code, nothing in ``--out``. Process-level: the real CLI, a real pipe the test holds;
synchronised on the pipe emptied (the batch read the first line, inside its read)."""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import subprocess
import termios

import pytest

from conftest import SAFETY_NET, cli_command
from processkit.engine.endings import stop_named
from streams import wait_until

CANCELLED = 107


def _unread(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]


@pytest.mark.parametrize(
    "sent, code, source",
    [
        (signal.SIGINT, -signal.SIGINT, "ctrl_c"),
        (signal.SIGTERM, CANCELLED, "sigterm"),
        (signal.SIGHUP, CANCELLED, "sighup"),
    ],
)
def test_a_stop_while_the_manifest_is_read_from_a_slow_pipe_is_the_batchs_stop(tmp_path, sent, code, source):
    read_end, write_end = os.pipe()
    out = tmp_path / "out"
    batch = subprocess.Popen([*cli_command(), "batch", "-", "--out", str(out)], stdin=read_end, stderr=subprocess.PIPE)
    try:
        os.write(write_end, b'{"args": ["true"]}\n')  # one line; the writer then holds the pipe open
        wait_until(lambda: not _unread(read_end), what="the batch reading its manifest")
        batch.send_signal(sent)
        _, err = batch.communicate(timeout=SAFETY_NET)
    finally:
        os.close(read_end)
        os.close(write_end)
        if batch.poll() is None:
            batch.kill()
            batch.wait()
    assert batch.returncode == code, err
    assert err.decode() == f"batch: no job started, cancelled by {stop_named(source)} (its input awaited)\n"
    assert not out.exists()
