"""The loop's epoll wait (``processkit/readiness.py``) reports what ``selectors``' epoll selector
reports, on real pipes and sockets: the interest masks, a hang-up and an error mapped to reading
and writing alike, an fd closed before it is unregistered, the timeout rounded up."""

from __future__ import annotations

import os
import selectors
import socket
import time

import pytest

from processkit import readiness


def _both(make):
    """The same descriptors registered with both selectors; their answers, as (fd, events) sets."""
    ours, theirs = readiness.Selector(), selectors.EpollSelector()
    try:
        registrations = make()
        for fd, events in registrations:
            ours.register(fd, events)
            theirs.register(fd, events)
        got = {(key.fd, events) for key, events in ours.select(0)}
        expected = {(key.fd, events) for key, events in theirs.select(0)}
        return got, expected
    finally:
        ours.close()
        theirs.close()


BOTH = readiness.EVENT_READ | readiness.EVENT_WRITE


def test_the_event_values_are_selectors():
    assert (readiness.EVENT_READ, readiness.EVENT_WRITE) == (selectors.EVENT_READ, selectors.EVENT_WRITE)


@pytest.mark.parametrize(
    "case",
    ["empty pipe", "pipe with data", "writer gone", "reader gone", "writable pipe", "socket pair", "socket peer gone"],
)
@pytest.mark.parametrize("interest", [readiness.EVENT_READ, readiness.EVENT_WRITE, BOTH], ids=["read", "write", "both"])
def test_each_state_reads_as_selectors_reads_it(case, interest):
    held: list = []

    def make():
        if case.startswith("socket"):
            a, b = socket.socketpair()
            held.extend((a, b))
            a.send(b"x")
            if case == "socket peer gone":
                a.close()
            return [(b.fileno(), interest)]
        r, w = os.pipe()
        held.extend((r, w))
        if case == "pipe with data":
            os.write(w, b"x")
        if case == "writer gone":
            os.close(w)
            held.remove(w)
        if case == "reader gone":
            os.close(r)
            held.remove(r)
            return [(w, interest)]
        return [(w if case == "writable pipe" else r, interest)]

    try:
        got, expected = _both(make)
    finally:
        for item in held:
            if isinstance(item, socket.socket):
                item.close()
            else:
                os.close(item)
    assert got == expected


def test_modify_unregister_and_a_closed_fd():
    ours = readiness.Selector()
    r, w = os.pipe()
    try:
        os.write(w, b"x")
        ours.register(r, readiness.EVENT_WRITE)
        assert ours.select(0) == []
        ours.modify(r, readiness.EVENT_READ)
        assert [(key.fd, events) for key, events in ours.select(0)] == [(r, readiness.EVENT_READ)]
        with pytest.raises(KeyError):
            ours.register(r, readiness.EVENT_READ)
        os.close(r)
        ours.unregister(r)  # closed first: no error, as with selectors
        with pytest.raises(KeyError):
            ours.unregister(r)
    finally:
        os.close(w)
        ours.close()


def test_a_short_timeout_waits_rather_than_polls():
    """0.1 ms is rounded up to 1 ms, as selectors does, not down to a busy poll of 0 (a loop
    waiting on a timer due in 0.1 ms would spin)."""
    ours = readiness.Selector()
    r, w = os.pipe()
    try:
        ours.register(r, readiness.EVENT_READ)
        started = time.monotonic()
        for _ in range(20):
            assert ours.select(0.0001) == []
        assert time.monotonic() - started >= 0.02
    finally:
        os.close(r)
        os.close(w)
        ours.close()
