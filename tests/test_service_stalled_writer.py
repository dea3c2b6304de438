"""A thread of the caller's own that writes part of a frame on its runner service's socket (its
header and the library's mark right, the rest not yet) and then stalls, or trickles the rest a
byte at a time, holds no other caller: the service took the library's next frames, of every
thread, as that frame's rest, and each later call of the process waited until the stalled writer
sent enough bytes to end it, for ever when it never did."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# A run in flight (its child blocked on a pipe this process holds), then the stalled writer's part
# of a frame, then a call of another thread and one of this thread; then the writer trickles the
# rest of its frame (``trickle``), or none of it, and a last call runs.
CALLER = r"""
import json, os, pickle, struct, subprocess, sys, threading, processkit
from processkit.api import shared

first = processkit.run(["true"]).runner_pid
read_end, write_end = os.pipe()
held = processkit.start(["sh", "-c", "read line; echo released"], stdin=read_end, stdout=subprocess.PIPE)
os.close(read_end)
connection = shared.connection()
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
os.write(write_end, b"go\n")
os.close(write_end)
out, _ = held.communicate(timeout=60)
print(json.dumps({
    "calls": [[c.returncode, c.stdout.decode()] for c in calls],
    "held": [held.returncode, out.decode()],
    "same_service": len({first, held.runner_pid, *(c.runner_pid for c in calls)}) == 1,
}))
"""


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
