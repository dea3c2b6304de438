"""The descriptors that come beside a frame on the runner service's socket belong to that frame
alone: those it does not name are closed, never handed to the request read after it. A frame
over ~32 KiB arrives in several reads, its descriptors with the first, and the request that
came in the same read as its end took them as its child's streams (the next call's stdout was
another call's pipe); so did the request after a frame that does not unpickle."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hand_frames import LAST_SPEC

PY = sys.executable

# The service stopped (its stop awaited, it is the caller's child), a frame of over 32 KiB written
# by hand with one descriptor beside it that it does not name, then an ordinary call whose stdout
# is a pipe of its own, sent through the API; the service continued, it reads both together.
CALLER = (
    r"""
import array, json, os, pickle, signal, socket, struct, sys, processkit
from processkit.api import launch, shared

case = sys.argv[1]
first = processkit.run(["true"]).runner_pid
"""
    + LAST_SPEC
    + r"""
spec.argv = ("true", "x" * 40000)
payload = {
    "run": pickle.dumps(("run", 9001, spec, {})),
    "no_pickle": b"\xff" * 40000,
    "no_kind": pickle.dumps(("zzz", 9001, "x" * 40000)),
}[case]
stray_r, stray_w = os.pipe()
out_r, out_w = os.pipe()
pid = connection.process.pid
os.kill(pid, signal.SIGSTOP)
os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOWAIT)
with connection._mail:
    connection._boxes[9001] = []
frame = struct.pack(">I", len(mark) + 8 + len(payload)) + mark + bytes(8) + payload
with connection._send_lock:
    sent = connection.sock.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [stray_w]))])
assert sent == len(frame)
call = launch.prepare(["sh", "-c", "echo mine"], {"stdout": out_w}, echo=False, function="run")
_, rid = call.send()
os.kill(pid, signal.SIGCONT)
reply = connection.take(rid, timeout=60)
own = connection.take(9001, timeout=60) if case == "run" else None
os.close(out_w)
os.close(stray_w)
os.set_blocking(stray_r, False)
try:
    stray = os.read(stray_r, 100).decode()
except BlockingIOError:
    stray = "still open"
after = processkit.run(["sh", "-c", "echo ok"], capture_output=True)
print(json.dumps({
    "code": reply[2]["code"] if reply else None,
    "own": own[2]["code"] if own else None,
    "out": os.read(out_r, 100).decode(),
    "stray": stray,
    "after": [after.returncode, after.stdout.decode(), after.runner_pid == first],
}))
"""
)


@pytest.mark.parametrize("case", ["run", "no_pickle", "no_kind"])
def test_a_large_frames_extra_descriptor_is_closed_never_the_next_requests(case):
    done = subprocess.run([PY, "-c", CALLER, case], capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["out"] == "mine\n", "the next call's child wrote to its own stdout"
    assert seen["stray"] == "", "the descriptor no request named was closed by the service"
    assert seen["code"] == 0
    assert seen["own"] == (0 if case == "run" else None), "a run request naming none still runs"
    assert seen["after"] == [0, "ok\n", True], "the same service serves the next call"
