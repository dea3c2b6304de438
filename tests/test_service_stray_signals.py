"""A stop signal that reaches the runner service (a child of the caller's user signalling its
parent, a Ctrl-C on the terminal the caller shares, a stray ``kill``) ends the runs in flight
and nothing more: the service serves the calls made after it. Before, the stop stayed the
host's for good, and every later call of that process was cancelled (107) without a start."""

from __future__ import annotations

import json
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
