"""A request the runner service reads but cannot act on is answered, by the id the library now
writes in clear after a frame's mark, and every other call goes on: one whose pickle holds the
service's mark (the caller's own bytes: 2^-64 a position, forced here by sending the mark itself
as ``input=``) was cut there and its call waited for ever; one more than the service could hold
(an address space limit its caller set on it after it started) ended the service with every run
it carried. Each call now returns a failure with a code and one line, on the same service, while a
run in flight goes on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hand_frames import HELD_RUN, RELEASED, seen_after

CALLER = (
    r"""
import json, os, resource, subprocess, sys, threading, processkit
from processkit.api import shared

"""
    + HELD_RUN
    + r"""
if sys.argv[1] == "unheld":  # the caller's child: its limit set from here, after its start
    status = open(f"/proc/{connection.pid}/status").read()
    size = int(status.split("VmSize:")[1].split()[0]) << 10
    resource.prlimit(connection.pid, resource.RLIMIT_AS, (size + (96 << 20), resource.RLIM_INFINITY))
calls, ended = [], []

def call():
    if sys.argv[1] == "mark":
        done = processkit.run(["cat"], input=b"a" + connection.mark + b"b", capture_output=True)
    else:
        done = processkit.run(["sh", "-c", "true", "x" * (200 << 20)], capture_output=True)
    ended.append([done.returncode, json.loads(done.diagnostics)["message"], done.runner_pid == first])

thread = threading.Thread(target=call, daemon=True)
thread.start()
thread.join(40)  # a safety net: it ends at once where it ends
calls.append(processkit.run(["sh", "-c", "echo after"], capture_output=True))
"""
    + RELEASED.replace("print(json.dumps({", 'print(json.dumps({"ended": ended,')
)


@pytest.mark.parametrize(
    ("case", "code", "words"),
    [
        ("mark", 104, "its request reached the runner service cut short"),
        ("unheld", 111, "is more than the runner service can hold under its address space limit"),
    ],
)
def test_a_request_the_service_cannot_act_on_is_answered_and_every_other_call_goes_on(tmp_path, case, code, words):
    seen = seen_after(CALLER, case, tmp_path, timeout=120)
    assert seen["ended"], "the call still waited after 40 s"
    returncode, message, same = seen["ended"][0]
    assert (returncode, same) == (code, True), seen
    assert words in message and "\n" not in message, message
    assert seen["calls"] == [[0, "after\n"]], "a later call ran"


# An address space limit set on the service so low that no read of the usual size finds room:
# every call ends (a failure, or ServiceGone once the service ends), none waits. Letting a frame
# go (above) must never turn a read that finds no room into one tried again for ever.
STARVED = r"""
import json, resource, threading, processkit
from processkit.api import shared
from processkit.api.service import ServiceGone
processkit.run(["true"])
connection = shared.connection()
resource.prlimit(connection.pid, resource.RLIMIT_AS, (1 << 20, 1 << 20))
ended = []

def calls():
    for command in (["true"], ["sh", "-c", "echo x"]):
        try:
            ended.append(processkit.run(command, capture_output=True).returncode)
        except ServiceGone:
            ended.append("ServiceGone")

thread = threading.Thread(target=calls, daemon=True)
thread.start()
thread.join(40)  # a safety net: they end at once where they end
print(json.dumps(ended))
"""


def test_a_service_with_no_room_to_read_ends_every_call(tmp_path):
    done = subprocess.run([sys.executable, "-c", STARVED], capture_output=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    ended = json.loads(done.stdout)
    assert len(ended) == 2, f"a call still waited after 40 s: {ended}"
