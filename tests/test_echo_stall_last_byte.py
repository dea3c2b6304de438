"""The echo's stall clock counts from the last byte its reader took, not from the look that
found it: a reader that took some of the echo during the wait for a descendant's pipes (after
the root's exit) and then stopped is given one bound from its last byte, so the drain that
follows the wait gives it up at once once that bound has passed. Before, the look at the drain
restarted the clock, and such a reader held the run a second bound (10 s, not 5)."""

from __future__ import annotations

import os
import select
import time

from conftest import SAFETY_NET, reaped, start_cli, wait_for_event, wait_for_file
from streams import wait_until

STALL = 1.0  # the echo's bound (5 s, ProcessKit's pump teardown), shortened
# The reader's pause: the scenario itself, one bound past the last byte it took, and a margin.
PAUSE = STALL + 0.3


def test_a_reader_that_stops_during_the_exits_wait_is_given_one_bound_from_its_last_byte(tmp_path):
    """The child writes 1 MiB (the runner holds most of it for the test's pipe) and exits, leaving
    a descendant on its pipes until ``release``. Once the runner has collected the root (its
    stall clock's first look), the test takes what the pipe holds, sees the runner write more
    (bytes taken), and then reads nothing for a bound; then it releases the descendant and
    reads again only once the drain has begun (``cleanup_finished``). The echo is given up
    there at once: the test gets no more than it had before. Before, the drain's look restarted
    the clock, and the test's reads kept the echo going to its end."""
    jsonl, release, exited = tmp_path / "run.jsonl", tmp_path / "release", tmp_path / "exited"
    script = f"head -c 1048576 /dev/zero; (while [ ! -e {release} ]; do sleep 0.01; done) & touch {exited}"
    patched = ("teardown", "ECHO_STALL_SECONDS", str(STALL), "race", "EXIT_DRAIN_SECONDS", str(SAFETY_NET))
    with reaped(start_cli("run", "--jsonl", jsonl, "--", "sh", "-c", script, patched=patched, cwd=tmp_path)) as proc:
        try:
            root = wait_for_event(jsonl, "run_started")["root_pid"]
            wait_for_file(exited)
            wait_until(lambda: not os.path.exists(f"/proc/{root}"), SAFETY_NET, "the runner collecting the root")
            fd = proc.stdout.fileno()
            # one read of what the pipe holds (not on to its end: the runner refills it meanwhile)
            taken = os.read(fd, 1 << 16)
            assert select.select([fd], [], [], SAFETY_NET)[0], "the runner wrote nothing more"
            time.sleep(PAUSE)  # the reader stops: one bound from the last byte the runner wrote
        finally:
            release.touch()
        wait_for_event(jsonl, "cleanup_finished")
        taken += proc.stdout.read()
        err = proc.stderr.read()
        assert proc.wait(SAFETY_NET) == 0, err
    assert b"the consumer of the runner's stdout stopped reading; live echo abandoned" in err
    assert len(taken) < 1048576
