"""A test's own end of a FIFO, opened and read within a deadline. A plain ``open`` of a FIFO
waits for its other end with no timeout: a process that died before its open would hang the
suite instead of failing the test. And whether another process holds a FIFO open
(``opened_by``), the event a test's writer waits for."""

from __future__ import annotations

import errno
import os
import select
import time

from streams import wait_until


def writer_of(fifo) -> int | None:
    """A write end of ``fifo`` once a reader has it open (None before: no open that waits)."""
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno != errno.ENXIO:
            raise
        return None


def opened_for_writing(fifo, timeout: float = 60.0, what: str = "the FIFO's reader") -> int:
    """A blocking write end of ``fifo`` once its reader has it open; an AssertionError naming
    ``what`` if none opens it within ``timeout``."""
    fd = wait_until(lambda: writer_of(fifo), timeout=timeout, what=what)
    os.set_blocking(fd, True)
    return fd


def written_into(fifo, timeout: float = 60.0, what: str = "the FIFO's writer") -> bytes:
    """What a writer wrote into ``fifo`` up to its close; an AssertionError naming ``what`` if no
    writer came and went within ``timeout``. Held non-blocking from the start, the read end sees
    an end of file only once a writer has closed (poll's POLLHUP), never before one came."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        deadline, data = time.monotonic() + timeout, b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{what} not done within {timeout}s (read so far: {data!r})")
            if not select.select([fd], [], [], left)[0]:
                continue
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                return data
            data += chunk
    finally:
        os.close(fd)


def opened_by(pid: int, fifo) -> bool:
    """Whether the process ``pid`` has ``fifo`` open (a descriptor closed while looked at is not
    it). The reader's ``O_PATH`` probe, taken before its real open, names the FIFO too but reads
    nothing: a writer that took it for the open could write and close before any reader came."""
    target = os.path.realpath(fifo)
    return any(_target(f"/proc/{pid}/fd/{fd}") == target and _opened(pid, fd) for fd in _fds(pid))


def _opened(pid: int, fd: str) -> bool:
    """Whether ``fd`` of ``pid`` is a real open (its flags lack ``O_PATH``), False when gone."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}") as info:
            flags = next(line.split()[1] for line in info if line.startswith("flags:"))
    except (OSError, StopIteration):
        return False
    return not int(flags, 8) & os.O_PATH


def _target(link: str) -> str | None:
    try:
        return os.readlink(link)
    except OSError:
        return None


def _fds(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return []
