"""A failed job's capture that cannot be read (EIO: a lost mount, a failing disk) is said as one
that cannot be opened, in the closing block's search and the JUnit's tail: the batch ends as its
jobs did (117), never as an internal error (104) from a read past the open. ``/proc/self/mem`` is
a regular file whose read at offset 0 fails with EIO."""

from __future__ import annotations

import errno
import os

import pytest

from processkit.report import junit, why_lines

UNREADABLE = "/proc/self/mem"


def _fails_to_read() -> bool:
    fd = os.open(UNREADABLE, os.O_RDONLY)
    try:
        os.read(fd, 1)
    except OSError as exc:
        return exc.errno == errno.EIO
    finally:
        os.close(fd)
    return False


@pytest.mark.skipif(not _fails_to_read(), reason="/proc/self/mem reads here (no EIO to stand for a failed read)")
def test_a_capture_whose_read_fails_is_said_as_one_not_opened():
    assert why_lines.shown(UNREADABLE, 10, 5, [1 << 20]) is None
    assert junit._tail_of(UNREADABLE, [1 << 20]) is None
