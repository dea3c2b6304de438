"""The live echo's consumer, paused as the child ends: a CI system's log reader on a loaded
machine (or busy uploading) takes nothing for a moment while the runner still holds the end of
the output, the part a failing suite prints last. A pause shorter than the echo's stall
(``teardown.ECHO_STALL_SECONDS``, the reference's pump-teardown bound) loses nothing."""

from __future__ import annotations

import sys
import time

from conftest import SAFETY_NET, reaped, start_cli, wait_for_event

# The scenario itself, not a wait for something: longer than the 1 s stall that lost the echo
# before, well within the 5 s one.
READER_PAUSE = 2.0


def test_a_reader_that_pauses_after_the_child_exits_gets_every_byte(tmp_path):
    size, last = 1_000_000, b"\nFAILED tests::the_one\n"
    jsonl = tmp_path / "run.jsonl"
    child = f"import sys; sys.stdout.buffer.write(b'x' * {size} + {last!r}); sys.exit(1)"
    proc = start_cli("run", "--jsonl", jsonl, "--", sys.executable, "-c", child)
    with reaped(proc):
        wait_for_event(jsonl, "root_exited")  # the child is gone: the runner holds what is not echoed yet
        time.sleep(READER_PAUSE)
        out, err = proc.communicate(timeout=SAFETY_NET)
    assert proc.returncode == 1, err
    assert b"live echo abandoned" not in err
    assert len(out) == size + len(last) and out.endswith(last)
