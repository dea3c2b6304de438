"""A thread of the caller's own that writes part of a frame on its runner service's socket (its
header and the library's mark right, the rest not yet) and then stalls, or trickles the rest a
byte at a time, holds no other caller: the service took the library's next frames, of every
thread, as that frame's rest, and each later call of the process waited until the stalled writer
sent enough bytes to end it, for ever when it never did. A real request larger than the service
can hold ends its call (answered by its id in clear, the service going on:
``test_service_unanswered_frames.py``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hand_frames import HELD_RUN, RELEASED, seen_after

# A run in flight (its child blocked on a pipe this process holds), then the stalled writer's part
# of a frame, then a call of another thread and one of this thread; then the writer trickles the
# rest of its frame (``trickle``), or none of it, and a last call runs.
CALLER = (
    r"""
import json, os, pickle, struct, subprocess, sys, threading, processkit
from processkit.api import shared

"""
    + HELD_RUN
    + r"""
payload = pickle.dumps(("run", 9501, None, {}))
head = struct.pack(">I", len(connection.mark) + 8 + len(payload)) + connection.mark + bytes(8)
connection.sock.sendall(head + payload[:3])  # part of a frame: then it stalls
calls = []
other = threading.Thread(target=lambda: calls.append(processkit.run(["sh", "-c", "echo other"], capture_output=True)))
other.start()
other.join()
calls.append(processkit.run(["sh", "-c", "echo own"], capture_output=True))
if sys.argv[1] == "trickle":
    for byte in payload[3:]:
        connection.sock.sendall(bytes([byte]))
calls.append(processkit.run(["sh", "-c", "echo after"], capture_output=True))
"""
    + RELEASED
)


@pytest.mark.parametrize("then", ["stall", "trickle"])
def test_a_thread_that_writes_part_of_a_frame_then_stalls_holds_no_other_call(tmp_path, then):
    seen = seen_after(CALLER, then, tmp_path, timeout=60)
    assert seen["calls"] == [[0, "other\n"], [0, "own\n"], [0, "after\n"]], "every later call ran"


# The service starts under an address space limit, the caller then lifts its own and sends a real
# request larger than the service can hold: the call must end (an error or a result), never wait.
UNHOLDABLE = r"""
import json, resource, threading, processkit

_, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (512 << 20, hard))  # the service starts under it
processkit.run(["true"])
resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
ended = []

def call():
    try:
        processkit.run(["sh", "-c", "true", "x" * (600 << 20)], capture_output=True)
        ended.append("returned")
    except Exception as exc:
        ended.append(type(exc).__name__)

thread = threading.Thread(target=call, daemon=True)
thread.start()
thread.join(90)
after = processkit.run(["sh", "-c", "echo ok"], capture_output=True)
print(json.dumps({"ended": ended, "after": [after.returncode, after.stdout.decode()]}))
"""


def test_a_real_request_more_than_the_service_can_hold_ends_its_call(tmp_path):
    done = subprocess.run([sys.executable, "-c", UNHOLDABLE], capture_output=True, timeout=150, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["ended"], "the call still waited after 90 s"
    assert seen["after"] == [0, "ok\n"], "a later call ran"
