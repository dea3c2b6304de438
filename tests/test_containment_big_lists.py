"""A kernel ``seq_file`` read returns at most a page: ``cgroup.procs`` of a run of 1501 processes
came back as 682 pids in the first read, which the runner took for the whole list. ``inspect``
then listed 682 members, ``attest`` from a later member answered ``not_a_member`` (115), and a
cancel's SIGTERM reached only the first page's processes. The lists are now read to the end."""

from __future__ import annotations

import json
import sys

from conftest import cli_command, run_cli, start_cli

# More processes than one page of pids holds: at most 8 bytes each (7 digits and a newline),
# at least 5 here (pids of 4 digits), so 1000 pass 4 KiB whatever the host's pid range.
SLEEPERS = 1000

# The run's child: starts the sleepers, asks ``attest`` from a process started after them all
# (the last member), says so; then, with SIGTERM blocked, waits for the cancel's SIGTERM and
# reaps every sleeper, counting those a SIGTERM ended. A sleeper the SIGTERM missed keeps the
# count from ever being printed (the hard kill at the end of the grace ends the child first).
CHILD = r"""
import json, os, signal, subprocess, sys
cli, run_id, count = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sleepers = [os.posix_spawnp("sleep", ["sleep", "1000"], os.environ) for _ in range(count)]
attest = subprocess.run(cli + ["attest", "--run-id", run_id], capture_output=True)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
print(json.dumps({"attest": attest.returncode, "sleepers": sleepers}), flush=True)
signal.sigwait({signal.SIGTERM})
ended = sum(os.WIFSIGNALED(s) and os.WTERMSIG(s) == signal.SIGTERM for s in (os.waitpid(p, 0)[1] for p in sleepers))
print("terminated", ended, flush=True)
"""


def test_a_run_of_more_members_than_a_page_of_pids_is_seen_whole(tmp_path):
    child = [sys.executable, "-c", CHILD, json.dumps(cli_command()), "big", str(SLEEPERS)]
    run = start_cli("run", "--run-id", "big", "--grace", "30s", "--jsonl", tmp_path / "run.jsonl", "--", *child)
    try:
        ready = json.loads(run.stdout.readline() or b"null")  # type: ignore[union-attr]
        assert ready is not None, run.stderr.read1()  # type: ignore[union-attr]
        assert ready["attest"] == 0  # the last-started member is a member
        inspected = run_cli("inspect", "--run-id", "big", "--json")
        assert inspected.returncode == 0, inspected.stderr
        members = {member["pid"] for member in json.loads(inspected.stdout)["members"]}
        assert set(ready["sleepers"]) <= members, f"{len(set(ready['sleepers']) - members)} sleepers not listed"
        cancelled = run_cli("cancel", "--run-id", "big")
        assert cancelled.returncode == 0, cancelled.stderr
        assert run.stdout.readline() == f"terminated {SLEEPERS}\n".encode()  # type: ignore[union-attr]
        assert run.wait(timeout=60) == 108
    finally:
        if run.poll() is None:
            run_cli("kill", "--run-id", "big")  # the sleepers with it
            run.kill()
            run.wait()
