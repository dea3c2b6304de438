"""A thread of the caller's own that writes part of a frame on its runner service's socket (its
header and the library's mark right, the rest not yet) and then stalls, or trickles the rest a
byte at a time, holds no other caller: the service took the library's next frames, of every
thread, as that frame's rest, and each later call of the process waited until the stalled writer
sent enough bytes to end it, for ever when it never did. Nor does one that sends more of a frame
than the service can hold: that ended the service with every run it carried."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hand_frames import HELD_RUN, RELEASED

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
head = struct.pack(">I", len(connection.mark) + len(payload)) + connection.mark
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
    try:
        done = subprocess.run([sys.executable, "-c", CALLER, then], capture_output=True, timeout=60, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("the calls after the stalled writer's part of a frame were held")
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["calls"] == [[0, "other\n"], [0, "own\n"], [0, "after\n"]], "every later call ran"
    assert seen["held"] == [0, "released\n"], "the run in flight went on"
    assert seen["same_service"], "the service itself went on"


# Under an address space limit the service inherits, a frame whose header claims 4 GiB, then more
# bytes sent than the service can hold: its buffer's growth raised MemoryError out of its reading.
UNHOLDABLE = r"""
import json, os, resource, struct, subprocess, processkit
from processkit.api import shared

_, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (512 << 20, hard))  # before the first call: the service starts under it
first = processkit.run(["true"]).runner_pid
read_end, write_end = os.pipe()
held = processkit.start(["sh", "-c", "read line; echo released"], stdin=read_end, stdout=subprocess.PIPE)
os.close(read_end)
connection = shared.connection()
connection.sock.sendall(struct.pack(">I", 0xFFFFFFF0) + connection.mark)
chunk = bytes(1 << 20)
try:
    for _ in range(700):
        connection.sock.sendall(chunk)
    sent = "all"
except BrokenPipeError:
    sent = "the service ended"
after = processkit.run(["sh", "-c", "echo ok"], capture_output=True)
try:
    os.write(write_end, b"go\n")
    out, _ = held.communicate(timeout=60)
    seen = [held.returncode, out.decode()]
except Exception as exc:
    seen = type(exc).__name__
print(json.dumps({"sent": sent, "held": seen, "after": [after.returncode, after.stdout.decode()],
                  "same_service": first == after.runner_pid}))
"""


def test_a_frame_more_than_the_service_can_hold_is_passed_over_and_the_service_goes_on(tmp_path):
    done = subprocess.run([sys.executable, "-c", UNHOLDABLE], capture_output=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen == {"sent": "all", "held": [0, "released\n"], "after": [0, "ok\n"], "same_service": True}
