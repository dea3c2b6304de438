"""``writeall.write_till_stopped`` (a Dask batch's lines, ``cli.batch_output``): until a stop
signal came it waits for the reader as a blocking write would, so a reader slower than its
one-second look for the stop still gets every byte; after a stop a reader that takes nothing for
``stall`` seconds loses the rest. A stop that came in the middle of a one-second round once ended
that round with the reader's time counted from before the stop and gave up at once: a reader
taking a piece every 1.3 s, never 2 s without taking one, lost its bytes about a second after
the stop. On the shared blocking description and on a non-blocking one; and after a stop no
write on a blocking pipe blocks, though another writer take the room it polled. The reader is a
thread of the test's (the runner has none)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading

import pytest

from conftest import full_pipe
from processkit import writeall

PIECE = 4096
EVERY = 1.3  # the slow reader's pace: longer than a round that looks for the stop (1 s)
STALL = 2.0  # the batch's bound after a stop (cli.batch_output)
DATA = bytes(range(256)) * (2 * PIECE // 256)  # two of the reader's pieces


@pytest.fixture(autouse=True)
def no_stop_yet(monkeypatch):
    """The module's record of a stop, this test's own."""
    monkeypatch.setattr(writeall, "_stop_came", [])
    monkeypatch.setattr(writeall, "_doubted", set())


def _slow_reader(read_end: int, written: threading.Event, got: bytearray) -> threading.Thread:
    """A thread taking one PIECE from ``read_end`` every EVERY seconds until ``written`` is set,
    then the rest to the end."""

    def read() -> None:
        while not written.wait(EVERY):
            got.extend(os.read(read_end, PIECE))
        while chunk := os.read(read_end, 65536):
            got.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def _written_to_slow_reader(blocking: bool, rounds: list) -> tuple[bytes, bytes]:
    """DATA written by ``write_till_stopped`` into a full pipe whose reader is slow; (what the
    pipe held before it, what the reader got). ``rounds`` gets each round's bound and whether
    a stop had come by its end."""
    read_end, write_end = full_pipe()
    os.set_blocking(write_end, blocking)
    held = b"x" * fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)  # full_pipe's fill
    got, written = bytearray(), threading.Event()
    real = writeall._bounded_taken

    def round_(fd, data, bound):
        taken = real(fd, data, bound)
        rounds.append((bound, bool(writeall._stop_came)))
        return taken

    writeall._bounded_taken = round_
    reader = _slow_reader(read_end, written, got)
    try:
        writeall.write_till_stopped(write_end, DATA, STALL)
    finally:
        writeall._bounded_taken = real
        written.set()
        os.close(write_end)
        reader.join()
        os.close(read_end)
    return held, bytes(got)


@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "non-blocking"])
def test_a_slow_reader_gets_every_byte_before_a_stop(blocking):
    rounds: list = []
    held, got = _written_to_slow_reader(blocking, rounds)
    assert got == held + DATA
    assert rounds and all(bound == 1.0 and not stopped for bound, stopped in rounds), rounds


@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "non-blocking"])
def test_a_stop_in_the_middle_of_a_round_leaves_a_slow_reader_its_bytes(blocking, monkeypatch):
    first_round = threading.Event()
    real = writeall._bounded_taken

    def stop_timed(fd, data, bound):
        if not first_round.is_set():  # the stop's timer set as the first round begins
            first_round.set()
            signal.setitimer(signal.ITIMER_REAL, 0.2)
        return real(fd, data, bound)

    monkeypatch.setattr(writeall, "_bounded_taken", stop_timed)
    before = signal.signal(signal.SIGALRM, lambda *_: writeall.doubt_own())
    rounds: list = []
    try:
        held, got = _written_to_slow_reader(blocking, rounds)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    # the stop came within the first round, which looked for it each second
    assert rounds[0] == (1.0, True), rounds
    assert got == held + DATA


def test_after_a_stop_another_writer_taking_the_room_never_blocks_the_write(monkeypatch):
    """A blocking pipe with room as the write polls, which another writer of it fills before the
    write: after a stop the write still gives up (``TimeoutError``), never blocks. It went on the
    shared blocking description, whose write then waited for a reader (PEP 475 retrying it
    through every stop signal); it goes on a private non-blocking one now."""
    read_end, write_end = full_pipe()
    os.read(read_end, PIECE)  # room for one piece
    other = os.open(f"/proc/self/fd/{write_end}", os.O_WRONLY | os.O_NONBLOCK)  # the other writer
    pipe = os.fstat(write_end).st_ino
    real_os = os

    class Racing:
        """``os`` as ``writeall`` sees it: the first write into the pipe finds its room taken."""

        raced = False

        def __getattr__(self, name):
            return getattr(real_os, name)

        def write(self, fd, data):
            if not self.raced and real_os.fstat(fd).st_ino == pipe:
                self.raced = True
                with contextlib.suppress(BlockingIOError):
                    while True:
                        real_os.write(other, b"y" * PIECE)
            return real_os.write(fd, data)

    def blocked(*_):
        raise AssertionError("the write blocked on a pipe nobody reads, after a stop")

    racing = Racing()
    monkeypatch.setattr(writeall, "os", racing)
    writeall.doubt_own()
    before = signal.signal(signal.SIGALRM, blocked)
    signal.setitimer(signal.ITIMER_REAL, 10 * STALL)
    try:
        with pytest.raises(TimeoutError):
            writeall.write_till_stopped(write_end, DATA, STALL)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        for fd in (other, write_end, read_end):
            os.close(fd)
    assert racing.raced
