"""``events --file FIFO``: a FIFO no process opens for writing waited for ever (no poll wakes a
reader for a writer that never came); then it read as an empty stream after 5 s, so ``--validate``
said "checked 0 lines: all valid", exit 0, a false pass for a CI check. One with no writer within
FIFO_WRITER_SECONDS (5 s) is now an unreadable stream: 111, said in one line on stderr. A run that
opens it while its reader waits is read whole."""

from __future__ import annotations

import os
import subprocess

from conftest import SAFETY_NET, run_cli, start_cli
from fifo_ends import opened_by
from streams import wait_until

MODES = ([], ["--json"], ["--follow"], ["--validate"])


def test_a_fifo_no_one_writes_is_an_unreadable_stream_not_an_empty_one(tmp_path):
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    readers = [start_cli("events", *mode, "--file", fifo) for mode in MODES]
    for mode, reader in zip(MODES, readers):
        try:
            out, err = reader.communicate(timeout=SAFETY_NET)  # the wait is 5 s
        except subprocess.TimeoutExpired:
            for started in readers:
                started.kill()
                started.wait()
            raise AssertionError(f"events {mode} --file FIFO still waits for a writer") from None
        said = f"processkit-cli: could not read the events stream `{fifo}`: no process opened the FIFO for writing within 5 s\n"
        assert reader.returncode == 111 and err == said.encode(), (mode, reader.returncode, err)
        assert out == b"", (mode, out)  # no "checked 0 lines: all valid"


def test_a_run_that_opens_the_fifo_after_its_reader_is_read_whole(tmp_path):
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    code, out, err, done = fed_when_open(fifo, ("events", "--json", "--file", fifo),
                                         lambda held: run_cli("run", "--jsonl", fifo, "--", "true"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert code == 0 and err == b"", err
    lines = out.splitlines()
    assert b'"event":"run_started"' in lines[0] and b'"event":"runner_exit"' in lines[-1]


def fed_when_open(fifo, args, write) -> tuple[int, bytes, bytes, object]:
    """``processkit-cli ARGS`` reading ``fifo``: its exit code, stdout and stderr, and what
    ``write(held)`` gave. A writer holds the FIFO from before the reader opens it until ``write``
    is done (called once the reader has it open), so however long either takes to start on a
    loaded host, the reader never finds it writerless. Every wait is bounded."""
    held = os.open(fifo, os.O_RDWR)
    reader = start_cli(*args)
    try:
        wait_until(lambda: opened_by(reader.pid, fifo), timeout=60, what="the reader's open")
        written = write(held)
        os.close(held)
        held = -1
        out, err = reader.communicate(timeout=60)
    finally:
        if held >= 0:
            os.close(held)
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    return reader.returncode, out, err, written


def _waits(pid: int) -> bool:
    """The process sleeps in its loop's wait (both readers then wake for the first bytes)."""
    try:
        with open(f"/proc/{pid}/wchan") as wchan:
            return wchan.read() == "do_epoll_wait"
    except FileNotFoundError:
        return False


def test_a_writer_read_by_the_loop_is_not_taken_for_none_by_the_look_for_one(tmp_path, monkeypatch):
    """A writer that opens, writes and closes between two looks for one is read by the loop;
    the next look, past FIFO_WRITER_SECONDS after the reader opened, finds the end of file: that
    is the stream's end, not a FIFO no one wrote (a false 111 after the whole stream was read)."""
    from processkit.cli import events

    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    reading = events.Reading(events.Target(str(fifo), None), events.PassThrough(), follow=False)
    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    os.write(writer, b'{"schema_version":1,"event":"run_started"}\n')
    clock = [events.time.monotonic() + events.FIFO_WRITER_SECONDS + 1]
    monkeypatch.setattr(events.time, "monotonic", lambda: clock[0])
    reading._on_readable()  # the loop takes the line as it comes
    os.close(writer)
    clock[0] += events.FOLLOW_POLL_SECONDS
    looked = []
    reading._look_for_writer(type("Loop", (), {"call_later": lambda self, *a: looked.append(a)})())
    assert looked, "the look for a writer gave up on a FIFO whose writer was read a moment ago"
    os.close(reading._fd)


def test_two_readers_of_one_fifo_share_its_lines_and_both_end_at_its_end(tmp_path):
    """Two ``events --json --file`` readers on one FIFO: both are woken for the same bytes and
    one may find them taken; that read's EAGAIN was an unreadable stream (111, "Resource
    temporarily unavailable"), in the first round or two here. It is a writer there with
    nothing yet: both end 0 at the writer's end, every line read by one of them, every round."""
    for round in range(8):
        ended, said = _two_readers(tmp_path / f"round{round}")
        assert ended == [(0, b""), (0, b"")], round
        assert sorted(int(line.rsplit(b":", 1)[1].rstrip(b"}")) for line in said) == list(range(3000))


def _two_readers(where) -> tuple[list[tuple[int, bytes]], list[bytes]]:
    """Two readers of a FIFO a shell writes 3000 lines into (a write per line), once both have
    it open: how each ended, and the lines they printed. The test holds the FIFO's writer from
    before either opens it until the shell is done, so neither finds it writerless (111 after
    FIFO_WRITER_SECONDS) however late the other or the shell starts on a loaded host."""
    where.mkdir()
    fifo = where / "events.fifo"
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDWR)  # never read: the readers' bytes stay theirs
    outs = [open(where / f"out{n}", "wb") for n in range(2)]  # a pipe's room would fill unread
    readers = [start_cli("events", "--json", "--file", fifo, stdout=out) for out in outs]
    try:
        for pid in (reader.pid for reader in readers):  # each has it open and waits in its loop
            wait_until(lambda pid=pid: opened_by(pid, fifo) and _waits(pid), timeout=60, what="the reader's wait")
        lines = (
            'for n in $(seq 0 2999); do echo "{\\"schema_version\\":1,\\"event\\":\\"run_started\\",\\"n\\":$n}"; done'
        )
        assert subprocess.run(["sh", "-c", lines], stdout=held).returncode == 0
        os.close(held)  # the last writer gone: the stream's end for both
        held = -1
        ended = [(reader.wait(timeout=60), reader.stderr.read()) for reader in readers]
    finally:
        if held >= 0:
            os.close(held)
        for out in outs:
            out.close()
        for reader in readers:
            if reader.poll() is None:
                reader.kill()
                reader.wait()
            reader.stderr.close()
    return ended, [line for n in range(2) for line in (where / f"out{n}").read_bytes().splitlines()]
