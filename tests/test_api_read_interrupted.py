"""A signal handler that raises (Ctrl-C's KeyboardInterrupt, any handler) runs as soon as the
call that read the service's socket returns: the bytes it read were dropped before they reached
the frames, the caller read every later reply from the wrong byte (a length of gigabytes), and
every later call of the process, of every thread, hung. Such a connection is now given up (its
service ends, stopping what it carried through its release) and the next call starts a fresh one."""

from __future__ import annotations

import json
import subprocess
import sys

PY = sys.executable

# The handler is made to run exactly there, many times: every read of a large reply is followed
# by the signal, raised in the main thread as the read returns. Then later calls, the whole
# bounded so a hang is reported.
CALLER = r"""
import json, os, signal, socket, threading, processkit
from processkit.api import shared

class Interrupted(Exception):
    pass

main = threading.get_ident()
armed = [True]
signal.signal(signal.SIGUSR1, lambda number, frame: (_ for _ in ()).throw(Interrupted()))
plain = socket.socket.recvmsg

def recvmsg(self, *args):
    got = plain(self, *args)
    if armed[0] and len(got[0]) >= 1 << 16 and threading.get_ident() == main:
        signal.pthread_kill(main, signal.SIGUSR1)  # the handler raises as this returns
    return got

socket.socket.recvmsg = recvmsg
seen = {"interrupted": 0, "completed": 0}
services = set()
for _ in range(12):
    try:
        processkit.run(["head", "-c", "900000", "/dev/zero"], capture_output=True)
        seen["completed"] += 1
    except Interrupted:
        seen["interrupted"] += 1
    services.add(shared.connection().process)
armed[0] = False
result = processkit.run(["head", "-c", "900000", "/dev/zero"], capture_output=True)  # a hang: the bound below
echo = processkit.run(["sh", "-c", "echo after"], capture_output=True)
seen["after"] = [result.returncode, len(result.stdout), echo.returncode, echo.stdout.decode()]
current = shared.connection().process
seen["left_running"] = [p.pid for p in services if p is not current and p.poll() is None]
print(json.dumps(seen), flush=True)
os._exit(0)
"""


def test_a_handler_raising_as_a_reply_is_read_never_leaves_later_calls_hanging():
    try:
        done = subprocess.run([PY, "-c", CALLER], capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("a later call hung: it read its reply from the wrong byte") from None
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["interrupted"] == 12, "each call's interruption reached it"
    assert seen["after"] == [0, 900000, 0, "after\n"], "the later calls ran"
    assert seen["left_running"] == [], "each service given up ended before its call's interruption went on"
