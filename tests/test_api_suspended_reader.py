"""A signal handler runs on the thread it interrupts. Where that thread was reading the runner
service's socket for every waiter (or held its mailbox), two faults followed: a handler's wait on a
handle started before slept for ever on a reader that was itself; and a second interruption as
the first one's read was given up left a connection whose bytes were lost in use, every later call
reading from the wrong byte (hung). Each caller runs in a process of its own, bounded so a hang is
reported; the handler runs exactly there: as a read of the socket returns, its bytes not yet kept."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import SAFETY_NET

PY = sys.executable

# The first read of the socket by the main thread after arming raises SIGUSR1 in it as it returns.
ARMED = r"""
import json, os, signal, socket, subprocess, threading, processkit
from processkit.api import service

main = threading.get_ident()
armed = [False]
plain = socket.socket.recvmsg

def recvmsg(self, *args):
    got = plain(self, *args)
    if armed[0] and threading.get_ident() == main:
        armed[0] = False
        signal.pthread_kill(main, signal.SIGUSR1)  # the handler runs as this returns
    return got

socket.socket.recvmsg = recvmsg
processkit.run(["true"])  # the service started, its hello read
"""

TWICE = (
    ARMED
    + r"""
class Interrupted(Exception):
    pass

signal.signal(signal.SIGUSR1, lambda number, frame: (_ for _ in ()).throw(Interrupted()))
given_up = service.Connection._ended
second = [True]

def _ended(self, *args, **kwargs):
    if second[0] and threading.get_ident() == main:
        second[0] = False
        signal.pthread_kill(main, signal.SIGUSR1)  # a second Ctrl-C as the giving up begins
    return given_up(self, *args, **kwargs)

service.Connection._ended = _ended
first = service.connection()
seen = {}
armed[0] = True
try:
    processkit.run(["echo", "cut"], capture_output=True)
except Interrupted:
    seen["interrupted"] = True
seen["after"] = processkit.run(["echo", "after"], capture_output=True).stdout.decode()
seen["new_service"] = service.connection() is not first
seen["first_ended"] = first.process.poll() is not None
print(json.dumps(seen), flush=True)
os._exit(0)
"""
)


def _seen(script: str) -> dict:
    try:
        done = subprocess.run([PY, "-c", script], capture_output=True, timeout=SAFETY_NET)
    except subprocess.TimeoutExpired:
        raise AssertionError("a call hung") from None
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def test_a_second_interruption_as_a_cut_read_is_given_up_retires_the_connection():
    seen = _seen(TWICE)
    assert seen == {"interrupted": True, "after": "after\n", "new_service": True, "first_ended": True}
