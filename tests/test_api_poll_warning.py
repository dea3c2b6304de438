"""``RunHandle.poll()`` never raises, as ``Popen.poll`` never does: under warnings as errors
(``python -W error``) a run whose child's exit left a process running made ``poll()`` raise
``LeftRunning``, breaking the ``while handle.poll() is None`` loop. The warning is the next
``wait``'s (or ``result``'s, ``communicate``'s), holding the result, and a later one returns it.
In a caller of its own under ``-W error``, through the real service."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import SAFETY_NET

SCRIPT = """
import json, subprocess, time
import processkit

left = ["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo hi"]
got = {}
handle = processkit.start(left, stdout=subprocess.PIPE)
got["out"] = handle.stdout.read().decode()  # its end: the child has exited
while (code := handle.poll()) is None:
    time.sleep(0.01)  # the caller's loop, as Popen's callers write it
got["poll"] = [code, handle.poll()]
try:
    handle.wait()
except processkit.LeftRunning as said:
    got["wait"] = ["LeftRunning", said.result.returncode]
got["again"] = handle.wait()
print(json.dumps(got))
"""


def test_poll_never_raises_the_run_s_warning_wait_does(tmp_path):
    argv = [sys.executable, "-W", "error", "-c", SCRIPT]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=SAFETY_NET)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got == {"out": "hi\n", "poll": [0, 0], "wait": ["LeftRunning", 0], "again": 0}, got
