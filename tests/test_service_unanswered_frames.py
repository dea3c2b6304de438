"""A request the runner service reads but cannot act on is answered, by the id the library now
writes in clear after a frame's mark, and every other call goes on: one whose pickle holds the
service's mark (the caller's own bytes: 2^-64 a position, forced here by sending the mark itself
as ``input=``) was cut there and its call waited for ever; one more than the service could hold
(an address space limit its caller set on it after it started) ended the service with every run
it carried; a request's spec the service asked for whole (its base taken by a frame of the
caller's own) and then let go as more than it could hold was never answered, its id in use. Each
call now returns a failure with a code and one line (its captures empty, as subprocess's: they
were None), on the same service, while a run in flight goes on; and an environment change made
for it reaches the next call (a request let go unread: the change was taken as sent, and lost)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hand_frames import HELD_RUN, RELEASED, seen_after

from processkit.api import frames as frames_module
from processkit.api import wire
from processkit.api.frames import Dropped, Frames
from processkit.service.inbound import refusal

CALLER = (
    r"""
import json, os, pickle, resource, struct, subprocess, sys, threading, processkit
from processkit.api import shared

"""
    + HELD_RUN
    + r"""
large = ["sh", "-c", "true", "x" * (48 << 20)]
if sys.argv[1] == "spec":  # the library's last spec (a large argv) taken as a base by a frame of the caller's
    try:
        processkit.run(large, capture_output=True)
    except OSError:  # E2BIG at the exec: its spec is the base all the same
        pass
    payload = pickle.dumps(("run", 9301, {"argv": ["true"]}, {"base": connection.sent_spec[2], "piped": (True, True)}))
    with connection._mail:
        connection._boxes[9301] = []
    with connection._send_lock:
        connection.sock.sendall(struct.pack(">I", len(connection.mark) + 8 + len(payload)) + connection.mark + bytes(8) + payload)
    connection.take(9301, timeout=60)
    connection.forget(9301)
if sys.argv[1] in ("unheld", "spec"):  # the caller's child: its limit set from here, after its start
    status = open(f"/proc/{connection.pid}/status").read()
    size = int(status.split("VmSize:")[1].split()[0]) << 10
    room = (96 if sys.argv[1] == "unheld" else 24) << 20  # less than the frame (the spec: 48 MiB)
    resource.prlimit(connection.pid, resource.RLIMIT_AS, (size + room, resource.RLIM_INFINITY))
calls, ended = [], []

def call():
    os.environ["SET_FOR_IT"] = "-kept"  # its change: the service never read it, the next call carries it
    if sys.argv[1] == "mark":
        done = processkit.run(["cat"], input=b"a" + connection.mark + b"b", capture_output=True)
    elif sys.argv[1] == "spec":  # sent as changes, its spec asked for whole: more than the service holds
        done = processkit.run(large, capture_output=True)
    else:
        done = processkit.run(["sh", "-c", "true", "x" * (200 << 20)], capture_output=True)
    message = json.loads(done.diagnostics)["message"]
    ended.append([done.returncode, message, done.runner_pid == first, repr(done.stdout), repr(done.stderr)])

thread = threading.Thread(target=call, daemon=True)
thread.start()
thread.join(30)  # a safety net: it ends at once where it ends
calls.append(processkit.run(["sh", "-c", 'echo "after$SET_FOR_IT"'], capture_output=True))
"""
    + RELEASED.replace("print(json.dumps({", 'print(json.dumps({"ended": ended,')
)


@pytest.mark.parametrize(
    ("case", "code", "words"),
    [
        ("mark", 104, "its request reached the runner service cut short"),
        ("unheld", 111, "is more than the runner service can hold under its address space limit"),
        ("spec", 111, "is more than the runner service can hold under its address space limit"),
    ],
)
def test_a_request_the_service_cannot_act_on_is_answered_and_every_other_call_goes_on(tmp_path, case, code, words):
    seen = seen_after(CALLER, case, tmp_path, timeout=120)
    assert seen["ended"], "the call still waited after 30 s"
    returncode, message, same, stdout, stderr = seen["ended"][0]
    assert (returncode, same) == (code, True), seen
    assert words in message and "\n" not in message, message
    assert (stdout, stderr) == ("b''", "b''"), "no child ran: its captures are empty, as subprocess's"
    assert seen["calls"] == [[0, "after-kept\n"]], "a later call ran, with the environment set for the refused one"


# The service's reader under an address space limit, read through a socket stub that raises
# MemoryError for a read asked above ``room`` bytes (as recvmsg allocates what it is asked for).
MARK = b"\x01markof8"


class Starved:
    """A socket stub: ``recvmsg`` gives ``stream`` in reads of what is asked, up to ``first`` for
    the first, and raises MemoryError for a read asked above ``room`` (None: any); ``asked``."""

    def __init__(self, stream: bytes, room: int | None, first: int | None = None) -> None:
        self.stream, self.room, self.first, self.asked = stream, room, first, []

    def recvmsg(self, want, space, flags):
        self.asked.append(want)
        if self.room is None or want > self.room:
            raise MemoryError
        size = want if self.first is None else min(want, self.first)
        self.first = None
        data, self.stream = self.stream[:size], self.stream[size:]
        return data, [], 0, None


def _read_all(sock) -> list:
    frames, got = Frames(mark=MARK), []
    while (messages := wire.receive(sock, frames)) is not None:
        got += [message for message, _ in messages]
    return got


def test_a_too_large_frame_whose_id_a_read_ended_inside_is_still_answered():
    """A read that ended inside the large frame's id in clear (15 of its first 20 bytes): the read
    for its rest found no room, and the frame was let go with no id, its call unanswered."""
    small, large, after = (
        bytes(wire.framed(m, MARK)) for m in (("signal", 5, 2), ("run", 7, "x" * 300_000), ("signal", 9, 15))
    )
    sock = Starved(small + large + after, room=1 << 16, first=len(small) + 15)
    got = _read_all(sock)
    assert got[0] == ("signal", 5, 2) and got[-1] == ("signal", 9, 15), got
    dropped = [message for message in got if type(message) is Dropped]
    assert [(d.rid, d.unheld) for d in dropped] == [(7, True)], got
    assert "is more than the runner service can hold" in dropped[0].why


def test_a_read_that_finds_no_room_is_tried_once_smaller_then_raised():
    """No read of the usual size finds room: one of 4 KiB is tried, once; then none finds room,
    and the reader raises (the service's loop ends its calls), never trying again for ever."""
    sock = Starved(b"", room=wire.READ_LEAST)
    assert wire.receive(sock, Frames(mark=MARK)) is None  # the 4 KiB read: the end of the stream
    assert sock.asked == [1 << 16, wire.READ_LEAST]
    sock = Starved(b"", room=None)
    with pytest.raises(MemoryError):
        wire.receive(sock, Frames(mark=MARK))
    assert sock.asked == [1 << 16, wire.READ_LEAST]


def test_a_frame_begun_whose_rest_finds_no_room_is_let_go_and_answered():
    large = bytes(wire.framed(("run", 7, "x" * 300_000), MARK))
    sock, frames = Starved(large[:100], room=1 << 16), Frames(mark=MARK)
    assert wire.receive(sock, frames) == []  # its first 100 bytes
    got = wire.receive(sock, frames)
    assert sock.asked == [1 << 16, len(large) - 100]  # its rest asked whole, no read tried again
    assert [(type(m), m.rid, m.unheld) for m, _ in got] == [(Dropped, 7, True)]


def test_a_frame_held_whole_that_unpickles_into_no_room_is_the_callers_limit(monkeypatch):
    """A MemoryError as a frame held in full was unpickled was said as the runner's own failure
    (104, "could not read its request (MemoryError)"), where it is the caller's limit (111)."""

    def no_room(data):
        raise MemoryError

    monkeypatch.setattr(frames_module, "pickle", SimpleNamespace(loads=no_room))
    got = Frames(mark=MARK).feed(bytes(wire.framed(("run", 7, "x" * 1000), MARK)))
    [(dropped, _)] = got
    assert (type(dropped), dropped.rid, dropped.unheld) == (Dropped, 7, True)
    assert "is more than the runner service can hold" in dropped.why
    assert refusal(dropped, dropped.why).code == 111
