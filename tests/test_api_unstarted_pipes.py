"""A run whose request the runner service could not act on ends with no child, and its pipes'
ends must end with it: ``start(["cat"], input=<the service's mark inside>, stdout=PIPE)`` was
answered 104 at once by ``wait``, but ``communicate`` waited for the stdout pipe's end of file,
which the service held (the cut frame's descriptors kept for the false frame begun at the mark,
until the connection's next frame): for ever without a timeout. A frame let go as more than the
service can hold (``Frames.give_up``) kept its descriptors open the same way. A request whose
bytes hold the mark is now sent without its descriptors (``frames.cut_within``): a direct read of
its pipe ends at once, where it waited for the connection's next frame."""

from __future__ import annotations

import array
import json
import os
import socket
import subprocess
import sys

from conftest import SAFETY_NET
from processkit.api import wire
from processkit.api.frames import Frames

MARK = b"\x01markof8"

# Where the service cuts a frame its caller did not (a mark straddling a frame's end and the next
# header: the mark's random bytes decide, no test can choose it) it keeps the frame's descriptors,
# the stdout pipe's write end among them, until the connection's next frame: ``communicate`` must
# return without that end of file. A copy of each write end kept here stands for the service's.
# Were ``communicate`` to wait for it, another thread would let the copies go (with the next
# frame) once the safety net passed (no window a right run must finish within), and the order
# says so.
CUT = r"""
import json, os, subprocess, sys, threading, processkit
from processkit.api import shared

processkit.run(["true"])  # the service started (its Popen's own pipes are not to be held)
held, made = [], os.pipe
def pipe():
    read, write = made()
    held.append(os.dup(write))
    return read, write
os.pipe = pipe
mark = shared.connection().mark
handle = processkit.start(["cat"], input=b"a" + mark + b"b", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
returned, order = threading.Event(), []


def next_frame():
    if not returned.wait(float(sys.argv[1])):
        order.append("the next frame")
        for fd in held:
            os.close(fd)
        processkit.run(["true"])


helper = threading.Thread(target=next_frame)
helper.start()
out, err = handle.communicate()
order.append("communicate")
returned.set()
helper.join()
print(json.dumps({"got": [handle.returncode, handle.pid, out.decode(), err.decode()], "order": order}))
"""


def test_communicate_on_a_request_cut_short_by_the_mark_ends_with_its_104(tmp_path):
    command = [sys.executable, "-c", CUT, str(SAFETY_NET)]
    done = subprocess.run(command, capture_output=True, timeout=2 * SAFETY_NET, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    said = json.loads(done.stdout)
    assert said["order"] == ["communicate"], "it waited for the pipe's end until the connection's next frame"
    assert said["got"] == [104, None, "", ""]


# A request whose bytes hold the mark, then what else reached its caller: a direct read of its pipe
# (no ``communicate``), the environment it carried (set for it, then unchanged for the next call),
# and a text-mode capture of a request cut so.
UNREAD = r"""
import json, os, select, subprocess, processkit
from processkit.api import shared

processkit.run(["true"])
mark = shared.connection().mark
handle = processkit.start(["cat"], input=b"a" + mark + b"b", stdout=subprocess.PIPE)
readable, _, _ = select.select([handle.stdout], [], [], 10)
read = handle.stdout.read() if readable else None
os.environ["SET_FOR_THE_CUT_ONE"] = "kept"
cut = processkit.run(["cat"], input="a" + mark.decode("latin-1") + "b", capture_output=True, encoding="latin-1")
after = processkit.run(["sh", "-c", 'echo "$SET_FOR_THE_CUT_ONE"'], capture_output=True)
print(json.dumps({
    "read": None if read is None else read.decode(), "code": handle.wait(),
    "cut": [cut.returncode, cut.stdout, cut.stderr], "after": [after.returncode, after.stdout.decode()],
}))
"""


def test_a_request_cut_short_hands_the_service_no_descriptor_and_loses_no_environment(tmp_path):
    """The service held the cut request's descriptors (the child's pipe ends) until the
    connection's next frame: a direct read of the pipe waited that long (here: for ever). And the
    environment the cut request carried was taken as sent, though the service never read it: the
    next call ran without the variable set."""
    done = subprocess.run([sys.executable, "-c", UNREAD], capture_output=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert (seen["read"], seen["code"]) == ("", 104), "the pipe reached its end of file at once"
    assert seen["cut"] == [104, "", ""], "a text-mode capture of a run with no child is empty, as subprocess's"
    assert seen["after"] == [0, "kept\n"], "the environment change reached the next call"


# A child that ran and then emptied its own event stream (its RunStarted line with it), once that
# line was there: whether it started is the service's reply's word (``started_ns``), not the stream's.
EMPTIED = r"""
import json, os, processkit

os.environ["J"] = os.path.join(os.getcwd(), "events.jsonl")
script = 'until grep -q run_started "$J"; do sleep 0.01; done; echo out; : > "$J"; echo err >&2'
done = processkit.run(["sh", "-c", script], capture_output=True, jsonl=os.environ["J"])
print(json.dumps([done.returncode, repr(done.stdout), repr(done.stderr)]))
"""


def test_a_run_whose_child_emptied_its_event_stream_keeps_its_captures(tmp_path, pump_backend):
    """The captures of a run that started were taken as a refused run's (empty) when its event
    stream had no RunStarted: the child's own output replaced by b""."""
    done = subprocess.run([sys.executable, "-c", EMPTIED], capture_output=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == [0, "b'out\\n'", "b'err\\n'"]


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_frame_let_go_as_too_large_closes_the_descriptors_it_brought():
    large = bytes(wire.framed(("run", 7, "x" * 300_000), MARK))
    read_end, write_end = os.pipe()
    brought = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [read_end, write_end]).tobytes())]
    frames = Frames(mark=MARK)
    try:
        assert frames.feed(large[:100], brought) == []
        got = frames.give_up()
        assert [(message.rid, message.unheld) for message, _ in got] == [(7, True)]
        assert not _open(read_end) and not _open(write_end), "its descriptors were left open"
    finally:
        for fd in (read_end, write_end):
            if _open(fd):
                os.close(fd)
