"""A sparse file's holes in an events stream (``events.follow._past_hole``): passed over, not
read, and never at the cost of data. The windows tested here (a file appended to or cut short
between the offset's look and its move) are microseconds wide, so ``os.lseek`` is wrapped to
change the file exactly there; the pipe is a real one."""

from __future__ import annotations

import json
import os

import pytest

from processkit.events.follow import READ_CHUNK, Follower
from processkit.events.reader import ECHO_BYTES, MAX_LINE_BYTES, LineSplitter

EVENT = {"schema_version": 1, "event": "appended"}


def _hole(tmp_path):
    """A file of one hole, a whole read long: its end is at the offset the follower looks from."""
    path = tmp_path / "sparse.jsonl"
    with open(path, "wb") as file:
        file.truncate(READ_CHUNK)
    return path


def _at_the_look(monkeypatch, change):
    """``os.lseek`` with ``change`` run as the hole's end is looked for (``SEEK_DATA``)."""
    real = os.lseek

    def lseek(fd, offset, whence):
        if whence != os.SEEK_DATA:
            return real(fd, offset, whence)
        try:
            return real(fd, offset, whence)
        finally:
            change()

    monkeypatch.setattr(os, "lseek", lseek)


def test_what_is_appended_while_the_end_is_looked_for_is_read(tmp_path, monkeypatch):
    """It was passed over as NULs: the offset was moved to the end as it was after the append."""
    path = _hole(tmp_path)

    def append():
        with open(path, "ab") as file:
            file.write(b"\n" + json.dumps(EVENT).encode() + b"\n")

    _at_the_look(monkeypatch, append)
    follower = Follower(str(path))
    events = []
    while not follower.done:
        events += [line.event for line in follower.read() if line.event is not None]
    follower.close()
    assert events == [EVENT]


def test_a_file_cut_short_while_the_end_is_looked_for_is_no_error(tmp_path, monkeypatch):
    """The hole's length came out negative: a ValueError, which ``events`` does not catch."""
    path = _hole(tmp_path)
    _at_the_look(monkeypatch, lambda: os.truncate(path, 10))
    follower = Follower(str(path))
    while not follower.done:
        follower.read()
    follower.close()


def test_a_pipe_of_nuls_is_read_as_it_comes():
    """A pipe has no offset: the look for a hole failed (``ESPIPE``) and the read with it."""
    reader, writer = os.pipe()
    try:
        os.write(writer, bytes(READ_CHUNK))
        os.close(writer)
        writer = -1
        follower = Follower("pipe", fd=reader)
        lines = []
        while not follower.done:
            lines += follower.read()
        assert [line.number for line in lines] == [1] and lines[0].event is None
    finally:
        os.close(reader)
        if writer >= 0:
            os.close(writer)


@pytest.mark.parametrize("pending", [0, 10, ECHO_BYTES + 5, MAX_LINE_BYTES - 3])
@pytest.mark.parametrize("count", [0, 1, ECHO_BYTES, MAX_LINE_BYTES, 15 << 40])
def test_a_hole_counted_is_a_hole_read(pending, count):
    """``LineSplitter.skip(n)`` gives what ``feed`` of n NULs gives, without holding them."""
    fed, skipped = LineSplitter(), LineSplitter()
    head = b"{" + b"x" * max(0, pending - 1)
    tail = b'"}\n{"event": "next"}\n'
    fed_count = min(count, MAX_LINE_BYTES + 1)  # past the limit, more NULs change nothing
    assert fed.feed(head) + fed.feed(bytes(fed_count)) + fed.feed(tail) == (
        skipped.feed(head) + skipped.skip(count) + skipped.feed(tail)
    )
