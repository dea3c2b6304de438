"""Every write the echo's reader takes restarts its stall clock, a direct one included (Python's
write with nothing queued, the native pump's own writes and splices), not only a write from the
backlog: a reader that took the echo's lines as they came, for longer than the bound after the
backlog last emptied (or with no backlog at all), and then a last burst that had to be queued,
kept its echo to the end. Before, the drain's look dated the clock back to the last backlog
write (or to the root's exit) and gave the echo up at once."""

from __future__ import annotations

import fcntl
import os
import select
import time

import pytest
from conftest import SAFETY_NET, reaped, start_cli, wait_for_event
from streams import wait_until

STALL = 1.0  # the echo's bound (5 s, ProcessKit's pump teardown), shortened
PIPE = 4096  # the test's pipe: the runner queues what a burst puts past it
BURST = 65536  # the child's last output, queued behind the test's pipe at the drain


def _read(fd: int, taken: bytearray) -> None:
    """What the pipe holds now, waited for (the runner's next write)."""
    assert select.select([fd], [], [], SAFETY_NET)[0], "the runner wrote nothing more"
    taken += os.read(fd, 1 << 16)


@pytest.mark.parametrize("first", [BURST, 0], ids=["backlog-first", "no-backlog"])
def test_a_reader_that_takes_direct_writes_keeps_its_echo_to_the_end(tmp_path, pump_backend, first):
    """The root writes ``first`` bytes (queued behind the test's pipe, which takes them all) and
    exits, leaving a descendant on its pipes that writes a line every few ms until ``stop``,
    then a BURST, then ends. The test takes everything as it comes (the lines are written
    directly: nothing is queued) for more than the bound after the root is gone and its first
    bytes taken, then stops reading, lets the descendant write the BURST, and reads again once
    the drain has begun (``cleanup_finished``): it gets every byte, no warning."""
    jsonl, stop = tmp_path / "run.jsonl", tmp_path / "stop"
    script = (
        f"head -c {first} /dev/zero; (until [ -e {stop} ]; do echo line; sleep 0.02; done; head -c {BURST} /dev/zero) &"
    )
    patched = ("teardown", "ECHO_STALL_SECONDS", str(STALL), "race", "EXIT_DRAIN_SECONDS", str(SAFETY_NET))
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE)
    runner = start_cli(
        "run", "--jsonl", jsonl, "--", "sh", "-c", script, patched=patched, stdout=write_end, cwd=tmp_path
    )
    os.close(write_end)
    taken = bytearray()
    with reaped(runner):
        try:
            root = wait_for_event(jsonl, "run_started")["root_pid"]
            while len(taken) < first:  # the backlog, all taken: the runner's last write from it
                _read(read_end, taken)
            wait_until(lambda: not os.path.exists(f"/proc/{root}"), SAFETY_NET, "the runner collecting the root")
            began = time.monotonic()  # the stall clock's start (the root's exit) and any backlog write are past
            while time.monotonic() < began + STALL * 1.2:  # the lines, taken as they come: direct writes
                _read(read_end, taken)
        finally:
            stop.touch()
        wait_for_event(jsonl, "cleanup_finished")  # the BURST queued, the drain's first look at hand
        while chunk := os.read(read_end, 1 << 16):
            taken += chunk
        os.close(read_end)
        err = runner.stderr.read()
        assert runner.wait(SAFETY_NET) == 0, err
    assert b"live echo abandoned" not in err, err
    assert taken.endswith(b"line\n" + bytes(BURST)), f"{len(taken)} bytes taken"
    assert taken.startswith(bytes(first) + b"line\n")
