"""A reader given up in one of ``bench``'s runs that reads again before a later one is waited
for again (``writeall.reads_again``) once an echo into it took bytes, and bytes the native pump
spliced into it count as taken (again68): a later run whose drain spliced the pipe full and then
queued the rest (the reader not reading meanwhile) was given up again at once, all but a pipe's
worth of it lost, where the reader came back for it as the drain began."""

from __future__ import annotations

import fcntl
import os
import select
import subprocess

from conftest import SAFETY_NET, patched_cli, reaped, wait_for_event

STALL = 1.0  # the echo's bound (5 s), shortened: the first run's reader is given up after it
SIZE = 300_000  # each run's output: more than the test's pipe holds
PIPE = 4096  # the test's pipe: less than the child's pipe holds at the runner's first drain


def test_spliced_bytes_taken_by_a_reader_that_reads_again_keep_a_later_run_echoed(tmp_path):
    """Run 1 writes SIZE bytes nobody reads: given up. The test then empties its pipe (the reader
    reads again) and lets run 2 write its SIZE bytes, which the runner's first drain splices into
    the empty pipe until it is full (its PIPE bytes) and then queues; the test reads again only once run 2's drain has begun
    (``cleanup_finished``), and gets all of run 2. Before, run 2's echo was given up at once and
    the test got only the spliced PIPE bytes."""
    jsonl_dir, first, go = tmp_path / "runs", tmp_path / "first", tmp_path / "go"
    command = (
        f"if [ -e {first} ]; then while [ ! -e {go} ]; do sleep 0.01; done; else touch {first}; fi; "
        f"head -c {SIZE} /dev/zero"
    )
    args = ["bench", "-r", "2", "--show-output", "--style", "none", "--jsonl-dir", str(jsonl_dir), command]
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE)
    env = dict(os.environ, PROCESSKIT_PUMP="native")  # the splice is the native pump's
    runner = subprocess.Popen(
        patched_cli("teardown", "ECHO_STALL_SECONDS", str(STALL)) + args,
        stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.PIPE, cwd=tmp_path, env=env,
    )  # fmt: skip
    os.close(write_end)
    with reaped(runner):
        try:
            assert select.select([runner.stderr], [], [], SAFETY_NET)[0], "run 1's echo not given up"
            line = runner.stderr.readline()  # said once run 1's drain is over, in one write
            assert b"the consumer of the runner's stdout stopped reading; live echo abandoned" in line, line
            os.set_blocking(read_end, False)
            try:
                while os.read(read_end, 1 << 16):  # the reader reads again: run 1's pipeful taken
                    pass
            except BlockingIOError:
                pass
        finally:
            go.touch()
        wait_for_event(jsonl_dir / "command-1-run-2.jsonl", "cleanup_finished")
        os.set_blocking(read_end, True)
        taken = b""
        while chunk := os.read(read_end, 1 << 16):
            taken += chunk
        os.close(read_end)
        err = runner.stderr.read()
        assert runner.wait(SAFETY_NET) == 0, err
    assert len(taken) == SIZE, f"{len(taken)} bytes of run 2 echoed; {err!r}"
    assert b"stopped reading" not in err
