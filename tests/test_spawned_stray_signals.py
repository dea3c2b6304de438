"""The process the runner service starts for a ``processkit.batch`` or a ``processkit.bench`` is
its jobs' parent: a job's ``kill -USR2 $PPID`` or ``kill -SEGV $PPID`` (a signal meant for "its
parent", the caller it would have under subprocess) ended it, and the call raised "the batch's
process ended without a reply". It drops them as the service does (``stray_signals.absorb``);
its parent-death signal (SIGTERM) still ends it when the caller dies, and its jobs with it."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys

import pytest

from fifo_ends import written_into

PY = sys.executable

# Job "a" signals its parent and lives on a little; job "b" outlives the signal and says so.
BATCH = r"""
import json, sys, processkit
signame, out = sys.argv[1], sys.argv[2]
jobs = [
    {"args": ["sh", "-c", "kill -" + signame + " $PPID; sleep 0.2"], "id": "a"},
    {"args": ["sh", "-c", "sleep 0.5; echo ok"], "id": "b"},
]
lines = processkit.batch(jobs, out=out)
print(json.dumps([[line["id"], line["exit_code"]] for line in lines]))
"""


@pytest.mark.parametrize(
    "signame, pump",
    [("USR2", "native"), ("USR1", "native"), ("RTMIN", "native"), ("SEGV", "native"), ("SEGV", "python")],
)
def test_a_jobs_signal_to_its_parent_does_not_end_the_batch(tmp_path, signame, pump):
    env = {**os.environ, "PROCESSKIT_PUMP": pump}
    done = subprocess.run([PY, "-c", BATCH, signame, str(tmp_path / "out")], capture_output=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr.decode()
    assert sorted(json.loads(done.stdout)) == [["a", 0], ["b", 0]], "both jobs' lines, each its child's exit"


BENCH = r"""
import json, processkit
result = processkit.bench([["sh", "-c", "kill -USR2 $PPID; kill -SEGV $PPID; kill -ALRM $PPID"]], runs=2)
print(json.dumps([len(command.times) for command in result.results]))
"""


def test_a_benchmarked_commands_signal_to_its_parent_does_not_end_the_benchmark():
    done = subprocess.run([PY, "-c", BENCH], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == [2], "both runs measured"


# The job starts a member that would outlive the caller by far, and says its pid and the job's
# parent's (the batch's process) through a FIFO. A member, not the job's root (which its
# parent-death signal also ends when the batch's process ends), that ignores SIGTERM: only the
# kill of its job's boundary ends it.
HELD = r"""
import sys, processkit
job = "trap '' TERM; sleep 3737.5 & echo $! $PPID > " + sys.argv[1] + "; wait"
processkit.batch([{"args": ["sh", "-c", job], "id": "held"}], out=sys.argv[2])
"""


def test_the_batch_process_and_its_job_end_when_its_caller_dies(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    caller = subprocess.Popen([PY, "-c", HELD, str(fifo), str(tmp_path / "out")], stderr=subprocess.DEVNULL)
    pidfds = {}
    try:
        member, batch_pid = map(int, written_into(fifo, what="the job's line").split())
        pidfds = {"the batch's process": os.pidfd_open(batch_pid), "the job's member": os.pidfd_open(member)}
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait(timeout=60)
    try:
        outlived = [what for what, pidfd in pidfds.items() if select.select([pidfd], [], [], 60)[0] != [pidfd]]
    finally:
        for pidfd in pidfds.values():
            if not select.select([pidfd], [], [], 0)[0]:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # what outlived it is not left behind
            os.close(pidfd)
    assert outlived == [], "outlived the batch's caller"
