"""A stop signal that reaches the runner service (a child of the caller's user signalling its
parent, a Ctrl-C on the terminal the caller shares, a stray ``kill``) ends the runs in flight
and nothing more: the service serves the calls made after it. Before, the stop stayed the
host's for good, and every later call of that process was cancelled (107) without a start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

PY = sys.executable

# A run in flight, then a child that signals its parent (the service) while it runs; the run in
# flight ends (its result read, so the signal was handled), then three calls made after it.
CALLER = r"""
import json, sys, processkit
signame = sys.argv[1]
held = processkit.start(["sleep", "3737.25"])
stray = processkit.run(["sh", "-c", "kill -" + signame + " $PPID"])
in_flight = held.result(timeout=60)
later = [processkit.run(["sh", "-c", "echo ok"], capture_output=True) for _ in range(3)]
print(json.dumps({
    "in_flight": [in_flight.returncode, in_flight.source],
    "later": [[r.returncode, r.source, (r.stdout or b"").decode()] for r in later],
    "same_service": len({held.runner_pid, stray.runner_pid, *(r.runner_pid for r in later)}) == 1,
}))
"""


@pytest.mark.parametrize("signame", ["TERM", "HUP", "INT"])
def test_a_stray_stop_signal_to_the_service_cancels_only_the_runs_in_flight(signame):
    done = subprocess.run([PY, "-c", CALLER, signame], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["in_flight"] == [107, "cancelled"], "a stop signal ends the runs in flight"
    assert seen["later"] == [[0, "child_exit", "ok\n"]] * 3, "the calls after it run"
    assert seen["same_service"], "the service itself went on"


# A child signals its parent (the service) with what a program may send "its parent" (a caller,
# under subprocess): a run of another thread in flight, and the calls after it, go on.
STRAYS = r"""
import json, signal, sys, threading, processkit
numbers = [getattr(signal, name) for name in sys.argv[1:]]
seen = {}
first = processkit.run(["true"]).runner_pid
def in_flight():
    result = processkit.run(["sh", "-c", "read line; echo done"], input=b"x\n", capture_output=True)
    seen["in_flight"] = [result.returncode, result.stdout.decode()]
thread = threading.Thread(target=in_flight)
thread.start()
sender = "import os, sys\nfor n in sys.argv[1:]: os.kill(os.getppid(), int(n))"
try:
    stray = processkit.run([sys.executable, "-c", sender, *map(str, numbers)])
    seen["stray"] = [stray.returncode, stray.runner_pid == first]
except BaseException as exc:
    seen["stray"] = type(exc).__name__
thread.join(60)
try:
    seen["after"] = processkit.run(["true"]).runner_pid == first
except BaseException as exc:
    seen["after"] = type(exc).__name__
print(json.dumps(seen))
"""


def strays_sent(names, env=None) -> dict:
    done = subprocess.run([PY, "-c", STRAYS, *names], capture_output=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def test_a_childs_stray_signal_to_its_parent_does_not_end_the_service():
    names = "SIGUSR2 SIGALRM SIGVTALRM SIGPROF SIGIO SIGRTMIN SIGRTMAX SIGABRT SIGTRAP".split()
    seen = strays_sent(names)
    assert seen["stray"] == [0, True], "the sender's own run ended as its child did"
    assert seen["in_flight"] == [0, "done\n"], "the other thread's run got its reply"
    assert seen["after"] is True, "the same service serves the next call"


# SIGSEGV, SIGBUS, SIGFPE and SIGILL sent by a child's ``kill`` (not raised by a fault) ended the
# service: a C handler drops each (csrc/faults.c), the pure-Python fallback blocks them; a real
# fault still ends a process either way (tests/test_fault_guard.py). The service started with
# faulthandler on too: its handler, found first, never sees a sent one.
@pytest.mark.parametrize("pump", ["native", "python"])
@pytest.mark.parametrize("faulthandler", ["", "1"])
def test_a_fault_signal_a_child_sends_its_parent_does_not_end_the_service(pump, faulthandler):
    env = {**os.environ, "PROCESSKIT_PUMP": pump, "PYTHONFAULTHANDLER": faulthandler}
    seen = strays_sent(["SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL"], env)
    assert seen["stray"] == [0, True], "the sender's own run ended as its child did"
    assert seen["in_flight"] == [0, "done\n"], "the other thread's run got its reply"
    assert seen["after"] is True, "the same service serves the next call"


# A batch's job (grep) writes its own status, then its parent's (the batch's process's): names and masks.
BATCH_PARENT = r"""
import processkit, sys
job = "exec grep -E '^(SigBlk|Name)' /proc/self/status /proc/$PPID/status > " + sys.argv[1]
lines = processkit.batch([{"args": ["sh", "-c", job], "id": "mask"}], out=sys.argv[2])
assert [line["exit_code"] for line in lines] == [0], lines
"""


def test_a_batch_process_blocks_the_fault_signals_and_its_jobs_none(tmp_path):
    # In the pure-Python fallback the process the service starts for a batch blocks ``FAULTS``,
    # as the service does (``spawned.begin``: it is its jobs' parent); every job it starts gets
    # an empty mask (the engine's spawns), so a job's own fault is never held up.
    env = {**os.environ, "PROCESSKIT_PUMP": "python"}
    status = tmp_path / "status"
    done = subprocess.run(
        [PY, "-c", BATCH_PARENT, str(status), str(tmp_path / "out")], capture_output=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr.decode()
    found: dict[str, dict[str, str]] = {}
    for line in status.read_text().splitlines():
        path, said = line.split(":", 1)
        field, value = said.split(":\t")
        found.setdefault(path, {})[field] = value
    job, parent = found.values()
    assert job["Name"] == "grep" and parent["Name"].startswith("python"), found
    faults = sum(1 << (getattr(signal, name) - 1) for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL"))
    assert int(job["SigBlk"], 16) & faults == 0, f"the job's SigBlk {job['SigBlk']}"
    assert int(parent["SigBlk"], 16) & faults == faults, f"the batch process's SigBlk {parent['SigBlk']}"
