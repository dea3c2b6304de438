"""A client's stdout that is a non-blocking pipe (the description shared with a Node.js or CI
parent that set ``O_NONBLOCK`` on it) and a reader slower than the writer: every byte still
arrives, as through a blocking one. Python's buffered writer took what the pipe had room for and
returned that count, which nothing read: ``events --file F --json`` exited 0 having written
64 KiB of a 5 MB stream, ``batch --show-output`` and ``batch --dry-run`` cut their output the
same way. Process-level: the real CLI, a real pipe, the reader starting only once the pipe is
full."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import termios
import time

import pytest

from conftest import cli_command
from test_batch import write_manifest

PIPE_ROOM = 1 << 16  # a pipe's default capacity: the output below is many times it


def _read_slowly(argv: list[str], cwd) -> tuple[int, bytes, bytes]:
    """``argv`` run with stdout a non-blocking pipe nobody reads until it is full; then all of
    it read, a piece at a time."""
    read_end, write_end = os.pipe()
    flags = fcntl.fcntl(write_end, fcntl.F_GETFL)
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    proc = subprocess.Popen(
        cli_command() + argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.PIPE
    )
    os.close(write_end)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the pipe is full (its last page may be part-used)
        waiting = fcntl.ioctl(read_end, termios.FIONREAD, b"\0\0\0\0")  # bytes waiting
        if int.from_bytes(waiting, "little") >= PIPE_ROOM - 8192 or proc.poll() is not None:
            break
        time.sleep(0.01)
    taken = bytearray()
    with os.fdopen(read_end, "rb", buffering=0) as reader:
        while piece := reader.read(4096):
            taken += piece
    return proc.wait(timeout=60), bytes(taken), proc.stderr.read()


def test_events_writes_the_whole_stream(tmp_path):
    line = {"schema_version": 1, "time": "2026-12-05T14:00:00.000Z", "event": "members_snapshot"}
    stream = tmp_path / "events.jsonl"
    data = b"".join(
        json.dumps({**line, "reason": "interval", "members": [], "n": n}, separators=(",", ":")).encode() + b"\n"
        for n in range(20000)
    )
    stream.write_bytes(data)
    code, taken, said = _read_slowly(["events", "--file", str(stream), "--json"], tmp_path)
    assert (code, len(taken)) == (0, len(data)), said
    assert hashlib.sha256(taken).hexdigest() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("how", ["show-output", "dry-run"])
def test_batch_writes_every_byte(tmp_path, how):
    blob = tmp_path / "blob"
    blob.write_bytes(os.urandom(3 * PIPE_ROOM) + b"end")
    if how == "show-output":
        manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "cat", "args": ["cat", str(blob)]}])
        argv = ["batch", "--show-output", "--out", str(tmp_path / "out"), manifest]
        expected = b"==> cat (exit 0) <==\n" + blob.read_bytes() + b"\n"
    else:
        argv = ["batch", "--dry-run", "--", "echo", "{}", ":::", *(f"{n:06d}" for n in range(20000))]
        expected = subprocess.run(cli_command() + argv, cwd=tmp_path, capture_output=True, check=True).stdout
        assert len(expected) > 4 * PIPE_ROOM
    code, taken, said = _read_slowly(argv, tmp_path)
    assert code == 0, said
    assert len(taken) == len(expected)
    assert taken == expected
