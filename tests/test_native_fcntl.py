"""``native.lock_exclusive``, ``native.lock_shared`` and ``native.set_pipe_size``: libc's
``flock`` and ``fcntl`` through the C module where a process has it loaded (a run, which then
never loads the ``fcntl`` extension module: tests/test_startup_imports.py), else the ``fcntl``
module (``lock_shared`` through it alone); the same outcomes either way."""

from __future__ import annotations

import fcntl
import os
import sys

import pytest

from processkit import native

pytest.importorskip("processkit._native")


@pytest.fixture(params=["native", "fcntl"])
def way(request, monkeypatch):
    """Each test once with the C module loaded and once as a process without it."""
    if request.param == "fcntl":
        monkeypatch.setitem(sys.modules, "processkit._native", None)
    return request.param


def test_a_lock_is_taken_once_and_refused_to_another_open_file_while_held(tmp_path, way):
    path = tmp_path / "live.lock"
    first = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    second = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        native.lock_exclusive(first)
        with pytest.raises(BlockingIOError):
            native.lock_exclusive(second)
        with pytest.raises(BlockingIOError):  # the fcntl module sees the same lock
            fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(BlockingIOError):  # a shared one is refused too, never waited for (scratch's mark)
            native.lock_shared(second)
        os.close(first)
        first = -1
        native.lock_exclusive(second)  # the holder's close released it
    finally:
        for fd in (first, second):
            if fd >= 0:
                os.close(fd)


def test_a_lock_on_a_closed_descriptor_raises_as_flock_does(tmp_path, way):
    fd = os.open(tmp_path / "gone", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.close(fd)
    with pytest.raises(OSError) as raised:
        native.lock_exclusive(fd)
    assert raised.value.errno == 9  # EBADF


def test_a_pipe_is_sized_as_fcntl_sizes_it(way):
    reader, writer = os.pipe()
    try:
        assert native.set_pipe_size(reader, 1 << 16) == fcntl.fcntl(reader, fcntl.F_GETPIPE_SZ) == 1 << 16
        with pytest.raises(OSError):
            native.set_pipe_size(reader, -1)
    finally:
        os.close(reader)
        os.close(writer)
    with pytest.raises(OSError):
        native.set_pipe_size(reader, 1 << 16)


def test_a_shared_lock_lets_another_shared_one_in_and_keeps_an_exclusive_one_out(tmp_path, way):
    path = tmp_path / "mark"
    fds = [os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600) for _ in range(3)]
    try:
        native.lock_shared(fds[0])
        native.lock_shared(fds[1])
        with pytest.raises(BlockingIOError):
            native.lock_exclusive(fds[2])
    finally:
        for fd in fds:
            os.close(fd)
