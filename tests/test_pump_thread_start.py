"""The native pump's hashing thread starts with the stream's first bytes: a stream that brings
none (most of a batch's short jobs) never starts one, and one that does hashes as before."""

from __future__ import annotations

import hashlib
import os

import pytest

from processkit.engine.capture import CaptureTarget
from processkit.engine.pump import NativePump

try:
    from processkit import _native
except ImportError:
    _native = None

pytestmark = pytest.mark.skipif(_native is None, reason="the native pump (processkit._native) is not built")


def pump_over(tmp_path, data: bytes):
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    path = str(tmp_path / "out.log")
    capture_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    pump = NativePump(read_fd, CaptureTarget(path, capture_fd, 1 << 20), None, hash_thread=True)
    os.write(write_fd, data)
    os.close(write_fd)
    pump.drain(1 << 30)
    return pump, read_fd, capture_fd


def test_a_stream_with_no_bytes_starts_no_thread(tmp_path):
    pump, *fds = pump_over(tmp_path, b"")
    assert pump._stream.threaded == 0 and pump._stream.wants_thread == 1
    assert pump.report().sha256 == hashlib.sha256(b"").hexdigest()
    for fd in fds:
        os.close(fd)


def test_the_first_bytes_start_it_and_the_digest_is_the_files(tmp_path):
    data = os.urandom(40_000)
    pump, *fds = pump_over(tmp_path, data)
    assert pump._stream.threaded == 1 and pump._stream.wants_thread == 0
    report = pump.report()
    assert (
        report.sha256
        == hashlib.sha256(data).hexdigest()
        == hashlib.sha256((tmp_path / "out.log").read_bytes()).hexdigest()
    )
    for fd in fds:
        os.close(fd)
