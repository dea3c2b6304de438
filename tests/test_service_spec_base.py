"""A run request's spec goes as its changes from the one the library sent last, against the base
its frame names. A frame the caller's own code writes on the library's socket can take that base
or be recorded in its place: the service then asks for the spec whole, and the library sends it,
so its later calls run as they were made. Before, every later call of the same spec type was
refused (a capture of None) or ran the other frame's command."""

from __future__ import annotations

import pytest
from hand_frames import LAST_SPEC
from test_api_send_interrupted_others import BLOCKED_IN_SEND, SENDTO
from test_service_malformed_frames import seen_of

# The caller's own call, then two frames it wrote itself: one naming the library's last request as
# its base (it took that base), one reusing the library's last request id with a whole spec of
# another command (recorded in the library's place). Then the caller's calls: run, start, and a run
# from another thread.
FORGED = (
    r"""
import json, pickle, processkit, struct, subprocess, threading
from processkit.api import shared

def frame(message):
    payload = pickle.dumps(message)
    return struct.pack(">I", len(mark) + 8 + len(payload)) + mark + bytes(8) + payload

first = processkit.run(["sh", "-c", "echo own"], capture_output=True)
"""
    + LAST_SPEC
    + r"""
last = connection.sent_spec[2]
spec.argv = ["sh", "-c", "echo forged"]
forged = [
    ("run", 9301, {"argv": ["sh", "-c", "echo forged"]}, {"base": last, "piped": (True, True)}),
    ("run", last, spec, {"base": 0, "piped": (True, True)}),
]
for message in forged:
    with connection._mail:
        connection._boxes[message[1]] = []
    with connection._send_lock:
        connection.sock.sendall(frame(message))
    connection.take(message[1], timeout=60)
    connection.forget(message[1])
after = [processkit.run(["sh", "-c", "echo own"], capture_output=True) for _ in range(2)]
handle = processkit.start(["sh", "-c", "echo own"], stdout=subprocess.PIPE)
out, _ = handle.communicate(timeout=60)
threaded = []
worker = threading.Thread(target=lambda: threaded.append(processkit.run(["sh", "-c", "echo own"], capture_output=True)))
worker.start()
worker.join()
print(json.dumps({
    "after": [[a.returncode, a.stdout and a.stdout.decode()] for a in after + threaded],
    "started": [handle.returncode, out.decode()],
    "same_service": len({first.runner_pid, handle.runner_pid, *(a.runner_pid for a in after + threaded)}) == 1,
}))
"""
)


def test_a_forged_base_frame_never_breaks_the_librarys_later_calls():
    seen = seen_of(FORGED)
    assert seen["after"] == [[0, "own\n"]] * 3, "each later call ran its own command and captured it"
    assert seen["started"] == [0, "own\n"], "a started run too"
    assert seen["same_service"], "the service itself went on"


# A frame of the caller's naming a base the service never recorded: the service asks for its spec
# whole, and that ask lies unread on the socket while the service is stopped and another thread's
# large request fills the socket, its write blocked under the send lock. The main thread's wait then
# reads the ask, and answering it waits for that lock: nobody read or looked at the service, which
# nobody continued, and every call hung.
ASKED_WHILE_STOPPED = (
    BLOCKED_IN_SEND
    + r"""
import json, os, pickle, processkit, select, signal, struct, sys, threading
from processkit.api import shared

SENDTO = int(sys.argv[1])
first = processkit.run(["true"]).runner_pid
connection = shared.connection()
mark = getattr(connection, "mark", b"")
payload = pickle.dumps(("run", 9401, {"argv": ["sh", "-c", "echo forged"]}, {"base": 987654, "piped": (True, True)}))
with connection._mail:
    connection._boxes[9401] = []
with connection._send_lock:
    connection.sock.sendall(struct.pack(">I", len(mark) + 8 + len(payload)) + mark + bytes(8) + payload)
select.select([connection.sock], [], [])  # the ask came, unread
pid = connection.process.pid
os.kill(pid, signal.SIGSTOP)
os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOWAIT)

results = []
large = ["sh", "-c", "echo own", *[str(i) * 60000 for i in range(10)]]
writer = threading.Thread(target=lambda: results.append(processkit.run(large, capture_output=True)))
writer.start()
while not blocked_in_send():
    os.sched_yield()
forged = connection.take(9401, timeout=60)
connection.forget(9401)
writer.join()
own = results[0]
print(json.dumps({"forged": forged is not None, "own": [own.returncode, own.stdout.decode()], "same_service": own.runner_pid == first}))
"""
)


@pytest.mark.skipif(SENDTO is None, reason="the sendto system call's number on this machine")
def test_an_ask_for_a_whole_spec_read_while_another_thread_writes_to_a_stopped_service_is_answered():
    seen = seen_of(ASKED_WHILE_STOPPED, str(SENDTO))
    assert seen["forged"], "the frame the caller wrote was answered (stopped: nobody here waits for it)"
    assert seen["own"] == [0, "own\n"], "the other thread's run was written, run and captured"
    assert seen["same_service"], "on the same service"


# A frame of the caller's takes the id the library numbered for its next request before that
# request's frame is written (the library numbers a request, its box made, before its send lock):
# the service holds it and asks for its spec. Answered with the library's spec, the service ran it
# as that frame's request, with that frame's fields and descriptors; now it is stopped unrun.
TAKEN_ID = (
    r"""
import json, os, pickle, processkit, struct, sys
from processkit.api import relay, shared

marker = sys.argv[1]
first = processkit.run(["true"]).runner_pid
"""
    + LAST_SPEC
    + r"""
spec.argv = ["sh", "-c", f"echo ran > {marker}"]
rid = next(connection._ids)  # as ``send`` numbers it, its box made before its frame is written
with connection._mail:
    connection._boxes[rid] = relay.Box(spec)
payload = pickle.dumps(("run", rid, {"argv": ["sh", "-c", "echo forged"]}, {"base": 987654, "piped": (False, False)}))
with connection._send_lock:
    connection.sock.sendall(struct.pack(">I", len(mark) + 8 + len(payload)) + mark + bytes(8) + payload)
reply = connection.take(rid, timeout=60)
connection.forget(rid)
after = processkit.run(["sh", "-c", "echo own"], capture_output=True)
print(json.dumps({
    "answered": reply is not None,
    "ran": os.path.exists(marker),
    "after": [after.returncode, after.stdout.decode()],
    "same_service": after.runner_pid == first,
}))
"""
)


def test_the_librarys_spec_is_never_sent_for_a_frame_of_the_callers_that_took_its_next_id(tmp_path):
    seen = seen_of(TAKEN_ID, str(tmp_path / "ran"))
    assert seen["answered"], "the held request was answered"
    assert not seen["ran"], "the library's spec was not run as the caller's frame's request"
    assert seen["after"] == [0, "own\n"], "the next call ran its own command"
    assert seen["same_service"], "on the same service"
