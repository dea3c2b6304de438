"""A call that names the caller's own end of its runner-service connection as a child's stream
(its number, or a dup of it) is refused before anything is sent: the child's bytes would reach
the service as the caller's frames, and a malformed one ended the service, and every run of
every thread in flight with it (``ServiceGone``)."""

from __future__ import annotations

import json
import subprocess
import sys

PY = sys.executable

CALLER = r"""
import json, os, threading, processkit
from processkit.api import service
first = processkit.run(["true"]).runner_pid
own = service.connection().sock.fileno()
seen = {}
def in_flight():
    result = processkit.run(["sh", "-c", "read line; echo done"], input=b"x\n", capture_output=True)
    seen["in_flight"] = [result.returncode, result.stdout.decode()]
thread = threading.Thread(target=in_flight)
thread.start()
for name, fd in (("number", own), ("dup", os.dup(own))):
    try:
        processkit.run(["sh", "-c", "printf '\\000\\000\\000\\010garbage!'"], stdout=fd)
        seen[name] = "ran"
    except BaseException as exc:
        seen[name] = type(exc).__name__
thread.join(60)
seen["after"] = processkit.run(["true"]).runner_pid == first
print(json.dumps(seen))
"""


def test_the_service_connection_is_never_a_childs_stream():
    done = subprocess.run([PY, "-c", CALLER], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["number"] == "ValueError" and seen["dup"] == "ValueError"
    assert seen["in_flight"] == [0, "done\n"], "the other thread's run got its reply"
    assert seen["after"], "the same service serves the next call"
