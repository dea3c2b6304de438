"""A frame on the runner service's socket that is not of the shape the API sends (a caller of
another version, or one that writes its own frames) is refused alone: it ended the service with
every run it carried, of every thread. And the descriptors a frame brought that its request did
not take are closed, never handed to the next request as its child's streams."""

from __future__ import annotations

import json
import subprocess
import sys

from hand_frames import HELD_RUN, LAST_SPEC, RELEASED

PY = sys.executable

# A run of another thread in flight (its child blocked on a pipe this process holds), then each
# malformed frame written straight to the socket, then the run released: it ends as its child
# did, on the same service, and a run request among them with an id of its own gets its failure.
CALLER = r"""
import json, os, pickle, processkit, struct, subprocess
from processkit.api import shared

first = processkit.run(["true"]).runner_pid
connection = shared.connection()
mark = getattr(connection, "mark", b"")  # after each frame's header, as the library writes them
spec = connection.sent_spec[0]
read_end, write_end = os.pipe()
held = processkit.start(["sh", "-c", "read line; echo released"], stdin=read_end, stdout=subprocess.PIPE)
os.close(read_end)

def frame(message):
    payload = pickle.dumps(message)
    return struct.pack(">I", len(mark) + 8 + len(payload)) + mark + bytes(8) + payload

malformed = [
    frame(42),
    frame(("run", 9001)),
    frame(("zzz", 9002, 1)),
    struct.pack(">I", len(mark) + 8 + 5) + mark + bytes(8) + b"\x00\x01\x02\x03\x04",
    frame(("run", 9003, {}, "no dict")),
    frame(("run", 9004, {}, {"fds": "x"})),
    frame(("run", 9005, {}, {"child_fds": 5})),
    frame(("run", 9006, {"no_field": 1}, {})),
    frame(("signal", 9007)),
    frame(("bench", 9008, None, "x")),
    frame(("batch", 9009, 1)),
    frame(([1], 9011)),  # a kind that is no key: it raised TypeError in the service's reader
]
with connection._send_lock:
    for data in malformed:
        connection.sock.sendall(data)
with connection._mail:
    connection._boxes[9010] = []
with connection._send_lock:
    connection.sock.sendall(frame(("run", 9010, "not a spec", {})))
reply = connection.take(9010, timeout=60)
os.write(write_end, b"go\n")
os.close(write_end)
out, _ = held.communicate(timeout=60)
after = processkit.run(["sh", "-c", "echo ok"], capture_output=True)
print(json.dumps({
    "refused": [reply[2]["code"], reply[2]["failure"][0]] if reply else None,
    "held": [held.returncode, out.decode()],
    "after": [after.returncode, after.stdout.decode()],
    "same_service": len({first, held.runner_pid, after.runner_pid}) == 1,
}))
"""


def test_a_malformed_frame_is_refused_alone_and_the_service_goes_on():
    done = subprocess.run([PY, "-c", CALLER], capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["refused"] == [104, "internal"], "a run request not of the shape gets its own failure"
    assert seen["held"] == [0, "released\n"], "the run in flight went on"
    assert seen["after"] == [0, "ok\n"], "the next call runs"
    assert seen["same_service"], "the service itself went on"


# A run request that names no descriptors but carries one (a pipe's write end), then a call that
# sends the caller's three standard streams: that call's child got the stray descriptor as its
# stdin and the caller's stdin as its stdout, and the pipe stayed open in the service.
STRAY = (
    r"""
import array, json, os, pickle, socket, struct, processkit
from processkit.api import shared

processkit.run(["true"])
"""
    + LAST_SPEC
    + r"""
read_end, write_end = os.pipe()
os.set_blocking(read_end, False)
payload = pickle.dumps(("run", 9001, spec, {}))
with connection._mail:
    connection._boxes[9001] = []
with connection._send_lock:
    connection.sock.sendmsg(
        [struct.pack(">I", len(mark) + 8 + len(payload)) + mark + bytes(8) + payload],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [write_end]))],
    )
ran = connection.take(9001, timeout=60)[2]["code"]
os.close(write_end)
echoed = processkit.run(["sh", "-c", "echo echoed"], echo=True)
try:
    at_end = os.read(read_end, 100) == b""
except BlockingIOError:
    at_end = False
print(json.dumps({"ran": ran, "echoed": echoed.returncode, "stray_closed": at_end}))
"""
)


def test_descriptors_no_request_took_are_closed_never_the_next_requests():
    done = subprocess.run([PY, "-c", STRAY], capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "echoed", "the echo went to the caller's stdout, not another descriptor"
    seen = json.loads(lines[-1])
    assert seen == {"ran": 0, "echoed": 0, "stray_closed": True}


# A whole spec with its fields unset (a caller writing its own frames, not through
# ``api.launch``), then a spec sent as its differences from that one (each naming its base as the
# library's frames do): each refused alone, and the caller's next call runs as it was sent.
UNSET = r"""
import json, pickle, processkit, struct
from processkit.api import shared

first = processkit.run(["true"]).runner_pid
connection = shared.connection()
mark = getattr(connection, "mark", b"")  # after each frame's header, as the library writes them
spec_type = connection.sent_spec[0]

def frame(message):
    payload = pickle.dumps(message)
    return struct.pack(">I", len(mark) + 8 + len(payload)) + mark + bytes(8) + payload

replies = []
for rid, spec, base in ((9101, spec_type.__new__(spec_type), 0), (9102, {"argv": ["true"]}, 9101)):
    with connection._mail:
        connection._boxes[rid] = []
    with connection._send_lock:
        connection.sock.sendall(frame(("run", rid, spec, {"base": base})))
    reply = connection.take(rid, timeout=60)
    replies.append([reply[2]["code"], reply[2]["failure"][0]] if reply else None)
after = processkit.run(["sh", "-c", "echo ok"], capture_output=True)
print(json.dumps({"replies": replies, "after": [after.returncode, after.stdout.decode()],
                  "same_service": first == after.runner_pid}))
"""


def test_a_spec_sent_against_one_with_unset_fields_is_refused_alone():
    """A spec sent as its differences from an earlier one with a field unset raised
    AttributeError out of the service's reading, ending it and every run it carried."""
    done = subprocess.run([PY, "-c", UNSET], capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["replies"] == [[100, "usage"]] * 2, "each refused as a spec with no run id"
    assert seen["after"] == [0, "ok\n"], "the next call runs"
    assert seen["same_service"], "the service itself went on"


# The caller's own call, then frames it wrote itself: a whole spec with a field of the wrong type,
# changes of the wrong type, and changes naming another command; then the same call again, which
# the library sends as its changes from its own first one (its run id alone).
HAND_MADE = (
    r"""
import json, pickle, processkit, struct
from processkit.api import shared

first = processkit.run(["sh", "-c", "echo own"], capture_output=True)
"""
    + LAST_SPEC
    + r"""
spec.argv = 5

def frame(message):
    payload = pickle.dumps(message)
    return struct.pack(">I", len(mark) + 8 + len(payload)) + mark + bytes(8) + payload

codes = []
for rid, sent in ((9201, spec), (9202, {"argv": 7}), (9203, {"argv": ["sh", "-c", "echo hand-made"]})):
    with connection._mail:
        connection._boxes[rid] = []
    with connection._send_lock:
        connection.sock.sendall(frame(("run", rid, sent, {"piped": (True, True)})))
    codes.append(connection.take(rid, timeout=60)[2]["code"])
after = [processkit.run(["sh", "-c", "echo own"], capture_output=True) for _ in range(2)]
print(json.dumps({"codes": codes, "after": [[a.returncode, a.stdout.decode()] for a in after],
                  "same_service": len({first.runner_pid, *(a.runner_pid for a in after)}) == 1}))
"""
)


def test_a_frame_the_caller_wrote_itself_is_never_the_base_of_its_later_calls():
    """The service applied a spec's changes to the last spec it read, whoever wrote it: after a
    hand-made frame, the caller's next call of the same command ran the hand-made one's argv."""
    done = subprocess.run([PY, "-c", HAND_MADE], capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["codes"][:2] == [104, 104] and seen["codes"][2] == 0, "each hand-made frame run or refused alone"
    assert seen["after"] == [[0, "own\n"]] * 2, "the caller's own calls run their own command"
    assert seen["same_service"], "the service itself went on"


# Under an address space limit the service inherits, a frame whose length says 4 GiB, more than
# one read of it sent: the service's next read asked ``recvmsg`` for the whole rest at once.
HUGE_LENGTH = r"""
import fcntl, json, os, resource, struct, subprocess, termios, processkit
from processkit.api import shared

_, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, hard))  # before the first call: the service starts under it
read_end, write_end = os.pipe()
held = processkit.start(["sh", "-c", "read line; echo released"], stdin=read_end, stdout=subprocess.PIPE)
os.close(read_end)
connection = shared.connection()
mark = getattr(connection, "mark", b"")  # after each frame's header, as the library writes them
with connection._send_lock:
    connection.sock.sendall(struct.pack(">I", 0xFFFFFFFF) + mark + b"\x80\x05" + b"x" * 70000)
unread = bytearray(4)
while True:  # until the service has taken them off the socket (or ended)
    fcntl.ioctl(connection.sock.fileno(), termios.TIOCOUTQ, unread)
    if struct.unpack("i", unread)[0] == 0:
        break
    os.sched_yield()
os.write(write_end, b"go\n")
os.close(write_end)
try:
    out, _ = held.communicate(timeout=60)
    seen = [held.returncode, out.decode()]
except Exception as exc:
    seen = type(exc).__name__
print(json.dumps(seen))
"""


def test_a_frame_that_claims_4_gib_does_not_end_the_service_under_an_address_space_limit():
    """Its read raised MemoryError in the service, which ended with every run it carried (the held
    run's ``wait`` raised ServiceGone)."""
    done = subprocess.run([PY, "-c", HUGE_LENGTH], capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == [0, "released\n"], "the run in flight went on"


# A run of the caller's in flight, then frames the caller wrote itself whose headers lie about their
# lengths (as they would without the library's mark): one that claims fewer bytes than it has, one
# that claims 100000 more than are sent. Then calls of another thread and of this one.
LYING_LENGTHS = (
    r"""
import json, os, pickle, struct, subprocess, threading, processkit
from processkit.api import shared

"""
    + HELD_RUN
    + r"""
payload = pickle.dumps(("run", 9401, None, {}))
with connection._send_lock:
    connection.sock.sendall(struct.pack(">I", 3) + payload)
    connection.sock.sendall(struct.pack(">I", len(payload) + 100000) + payload)
calls = []
other = threading.Thread(target=lambda: calls.append(processkit.run(["sh", "-c", "echo other"], capture_output=True)))
other.start()
other.join()
calls.append(processkit.run(["sh", "-c", "echo own"], capture_output=True))
"""
    + RELEASED
)


def seen_of(script: str, *args: str) -> dict:
    """What a caller script printed last, as JSON; it must end well (a hang fails it in time)."""
    done = subprocess.run([PY, "-c", script, *args], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout.decode().splitlines()[-1])


def test_a_frame_whose_header_lies_about_its_length_never_takes_the_librarys_later_frames():
    """The service took the library's next frames, of every thread, as the rest of a frame that
    claimed more bytes than were sent: each later call of the process hung."""
    seen = seen_of(LYING_LENGTHS)
    assert seen["calls"] == [[0, "other\n"], [0, "own\n"]], "another thread's call and this one's ran"
    assert seen["held"] == [0, "released\n"], "the run in flight went on"
    assert seen["same_service"], "the service itself went on"
