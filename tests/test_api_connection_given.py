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
from processkit.api import shared
first = processkit.run(["true"]).runner_pid
own = shared.connection().sock.fileno()
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


CLOSED_STANDARD = r"""
import json, os, processkit
seen = {"first": processkit.run(["true"]).returncode}  # the connection is made by a call naming no stream
seen["echo"] = processkit.run(["sh", "-c", "echo hi >&2"], echo=True).returncode
reader = processkit.run(["sh", "-c", "cat; echo read-to-end >&2"], echo=True)  # the caller's stdin: closed
seen["reader"] = reader.returncode
seen["after"] = processkit.run(["true"]).returncode
os.write(2, (json.dumps(seen) + "\n").encode())
"""


def test_a_caller_started_with_its_standard_streams_closed_calls_as_any_other():
    """The connection never takes the number of a closed standard stream: if it did, every call
    handing the caller's standard streams on was refused as naming the connection, or (before that
    refusal) the child read the service's replies as its stdin."""
    done = subprocess.run(
        ["sh", "-c", 'exec "$0" -c "$1" <&- >&-', PY, CLOSED_STANDARD], capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stderr.decode().splitlines()
    assert lines[:2] == ["hi", "read-to-end"]
    assert json.loads(lines[-1]) == {"first": 0, "echo": 0, "reader": 0, "after": 0}
