"""A ``processkit.batch`` whose caller is SIGKILLed: the batch's stop descriptor reaches end of
file, the jobs are stopped, and while they wait out their grace (they ignore SIGTERM) the
processes left behind sleep, then all end (issue 45: the descriptor stayed on the loop, and every
turn read its end of file again, a busy spin of a whole CPU)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from conftest import wait_for_file

CALLER = r"""
import sys, processkit
ready = sys.argv[2]
jobs = [
    {"args": ["sh", "-c", f"trap '' TERM; touch {ready}.{n}; sleep 60"], "id": f"j{n}", "grace": "3s"}
    for n in range(2)
]
processkit.batch(jobs, jobs=2, out=sys.argv[1])
"""


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for task in os.listdir(f"/proc/{parent}/task") if os.path.isdir(f"/proc/{parent}/task") else ():
            try:
                with open(f"/proc/{parent}/task/{task}/children") as handle:
                    children = {int(word) for word in handle.read().split()}
            except OSError:
                continue
            todo.extend(children - found)
            found |= children
    return found


def _cpu_seconds(pids: set[int]) -> float:
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended: its time is no longer counted anywhere we can read
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def test_a_batch_whose_caller_is_killed_sleeps_through_the_grace_and_leaves_nothing(tmp_path):
    ready = str(tmp_path / "ready")
    caller = subprocess.Popen([sys.executable, "-c", CALLER, str(tmp_path / "out"), ready])
    try:
        for n in range(2):
            wait_for_file(f"{ready}.{n}", timeout=60)
        left = _descendants(caller.pid)
        assert left, "the caller's service and batch processes"
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait()
        time.sleep(0.3)  # the stop reaches the batch; the jobs now wait out their 3 s grace
        before, started = _cpu_seconds(left), time.monotonic()
        time.sleep(1.5)
        spent = (_cpu_seconds(left) - before) / (time.monotonic() - started)
        assert spent < 0.25, f"the processes left spent {spent:.2f} s of CPU a second during the grace"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in left):
            time.sleep(0.1)
        alive = [pid for pid in left if os.path.exists(f"/proc/{pid}") and _state(pid) != "Z"]
        assert alive == [], "every process ends after the grace"
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
