"""A run whose request the runner service could not act on ends with no child, and its pipes'
ends must end with it: ``start(["cat"], input=<the service's mark inside>, stdout=PIPE)`` was
answered 104 at once by ``wait``, but ``communicate`` waited for the stdout pipe's end of file,
which the service held (the cut frame's descriptors kept for the false frame begun at the mark,
until the connection's next frame): for ever without a timeout. A frame let go as more than the
service can hold (``Frames.give_up``) kept its descriptors open the same way."""

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

# The service keeps the cut frame's descriptors (the stdout pipe's write end among them) until
# the connection's next frame: ``communicate`` must return without that end of file. Were it to
# wait for it, the next frame sent from another thread (once the safety net passed: no window a
# right run must finish within) would end the wait, and the order says so.
CUT = r"""
import json, subprocess, sys, threading, processkit
from processkit.api import shared

processkit.run(["true"])
mark = shared.connection().mark
handle = processkit.start(["cat"], input=b"a" + mark + b"b", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
returned, order = threading.Event(), []


def next_frame():
    if not returned.wait(float(sys.argv[1])):
        order.append("the next frame")
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
