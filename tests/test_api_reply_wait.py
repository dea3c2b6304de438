"""A caller waiting for its reply sleeps once a call (issue 49): it waits in poll for the reply,
not in the socket's read, which the kernel also wakes each time the service reads one of the
caller's requests (a stream socket's waiters are all woken when its peer takes what was sent,
to say there is room to write), a wake-up and two context switches a call for nothing."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r"""
import json, resource, processkit
for _ in range(5):
    processkit.run(["true"])
calls = 100
before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
for _ in range(calls):
    assert processkit.run(["true"]).returncode == 0
after = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
print(json.dumps({"per_call": (after - before) / calls}))
"""


def test_a_call_puts_its_caller_to_sleep_once():
    """The calling thread's voluntary context switches per call: one (its wait for the reply);
    before, about 1.5-1.9, the read's wake-ups at the service's read of each request among them."""
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    per_call = json.loads(done.stdout)["per_call"]
    assert per_call <= 1.25, per_call
