"""``wait --report-outcome`` for a live run whose ``run_started`` line is longer than the 64 KiB
read of the stream's head (``run --argv-raw`` with a long argument: the line holds the argv).
The stream is this run's and ends in its ``runner_exit``; the report must say so, not
``unknown``. The reference reads only the tail; the head's check that the stream is this run's
(an extension) reads the first line whole, within the 1 MiB a line may take."""

from __future__ import annotations

import json
import os

from conftest import run_cli, start_cli, wait_for_event
from fifo_ends import opened_for_writing
from streams import wait_until

LONG = "x" * 100_000  # one argument, below the kernel's 128 KiB for one


def sleeping(pid: int) -> bool:
    """Whether ``wait`` is in its poll's sleep: it saw the run live."""
    try:
        with open(f"/proc/{pid}/wchan") as handle:
            return "nanosleep" in handle.read()
    except OSError:
        return False


def test_a_run_started_line_past_the_head_window_is_still_this_runs(tmp_path):
    jsonl, gate = tmp_path / "run.jsonl", tmp_path / "gate"
    os.mkfifo(gate)
    launched = run_cli(
        "run", "--detach", "--argv-raw", "--run-id", "long-head", "--jsonl", jsonl,
        "--", "sh", "-c", 'read x < "$1"; exit 7', "sh", gate, LONG,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    assert len(jsonl.read_bytes().split(b"\n")[0]) > 64 * 1024
    waiter = start_cli("wait", "--run-id", "long-head", "--timeout", "60s", "--report-outcome")
    try:
        # The gate opens only once ``wait`` saw the run live; a wait that never gets there fails
        # the test (the bound is a safety net), where it used to go on after 30 s unchecked.
        wait_until(lambda: sleeping(waiter.pid) or waiter.poll() is not None, timeout=120, what="wait's poll")
        assert waiter.poll() is None, waiter.communicate()
        with open(opened_for_writing(gate, what="the child's open of the gate"), "w") as opened:
            opened.write("go\n")
        wait_for_event(jsonl, "runner_exit")
        stdout, stderr = waiter.communicate(timeout=60)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, stderr
    assert json.loads(stdout) == {
        "run_id": "long-head",
        "status": "reported",
        "code": 7,
        "source": "child_exit",
        "child_code": 7,
    }
