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

import pytest
from conftest import SAFETY_NET

PY = sys.executable

# Once armed, the first read of the socket raises SIGUSR1 in the main thread as it returns (its
# bytes not yet kept, where the main thread read); armed for "received", as the frames it completed
# are handed back, not yet filed; armed for "filing", as its first reply is filed, under the
# mailbox's lock. While a call another thread opened is open ("another": the older run's), a thread
# of the library's reads for the main thread (``api.relay``); "no thread": none can start, and the
# main thread reads, as it does while every open call is its own.
ARMED = r"""
import json, os, signal, socket, subprocess, sys, threading, processkit
from processkit.api import bells, service, shared, wire
from processkit.errors import Failure

main = threading.get_ident()
armed = [False]
point = sys.argv[1] if len(sys.argv) > 1 else "read"
owner, name = {"read": (socket.socket, "recvmsg"), "received": (wire, "receive"), "filing": (bells.Bells, "ring")}[point]
plain = getattr(owner, name)

def interrupted(*args, **kwargs):
    got = plain(*args, **kwargs)
    if armed[0]:
        armed[0] = False
        signal.pthread_kill(main, signal.SIGUSR1)  # the handler runs as soon as the main thread runs
    return got

if "no thread" in sys.argv:
    start = threading.Thread.start

    def refused(self):
        if self.name == "processkit-relay":
            raise RuntimeError("can't start new thread")
        start(self)

    threading.Thread.start = refused

setattr(owner, name, interrupted)
processkit.run(["true"])  # the service started, its hello read


def opened(make):  # make(), called by another thread for "another"
    if "another" not in sys.argv:
        return make()
    made = []
    other = threading.Thread(target=lambda: made.append(make()))
    other.start()
    other.join()
    return made[0]
"""

OLDER = (
    ARMED
    + r"""
older = opened(lambda: processkit.start(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL))
seen = {}

def handler(*_):
    older.stdin.close()  # its run ends now: its reply can only come through the interrupted read
    try:
        seen["waited"] = older.wait()
    except Failure as exc:
        seen["refused"] = [exc.code, exc.kind.label, "signal handler" in str(exc), "filed a reply" in str(exc)]
    seen["polled"] = older.poll()
    try:
        older.wait(timeout=0)
    except subprocess.TimeoutExpired:
        seen["looked"] = True

signal.signal(signal.SIGUSR1, handler)
armed[0] = True
seen["outer"] = processkit.run(["echo", "outer"], capture_output=True).stdout.decode()
seen["older"] = older.wait()
seen["after"] = processkit.run(["echo", "after"], capture_output=True).stdout.decode()
print(json.dumps(seen), flush=True)
os._exit(0)
"""
)

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
first = shared.connection()
seen = {}
armed[0] = True
try:
    processkit.run(["echo", "cut"], capture_output=True)
except Interrupted:
    seen["interrupted"] = True
seen["after"] = processkit.run(["echo", "after"], capture_output=True).stdout.decode()
seen["new_service"] = shared.connection() is not first
seen["first_ended"] = first.process.poll() is not None
print(json.dumps(seen), flush=True)
os._exit(0)
"""
)

# One interruption as a call takes the reader's role, before its read: a handle's look (poll) is
# interrupted just after it has become the reader (its read's wait worked out, ``min``); with a
# second handle open that another thread started, just after it chose a thread of its own to read
# (``api.relay``).
TAKEN = r"""
import json, os, signal, subprocess, sys, threading, processkit
from processkit.api import service

class Interrupted(Exception):
    pass

main = threading.get_ident()
signal.signal(signal.SIGUSR1, lambda number, frame: (_ for _ in ()).throw(Interrupted()))
older = processkit.start(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
second = []
for _ in sys.argv[1:]:
    other = threading.Thread(target=lambda: second.append(processkit.start(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)))
    other.start()
    other.join()
armed = [True]

def interrupted(*args):
    if armed[0] and threading.get_ident() == main:
        armed[0] = False
        signal.pthread_kill(main, signal.SIGUSR1)  # the handler raises as this returns
    return min(*args)

service.min = interrupted  # the module's own name for it: the builtin elsewhere
seen = {}
try:
    older.poll()
except Interrupted:
    seen["interrupted"] = True
seen["after"] = processkit.run(["echo", "after"], capture_output=True).stdout.decode()
older.stdin.close()
seen["older"] = older.wait()
for handle in second:
    handle.stdin.close()
    handle.wait()
print(json.dumps(seen), flush=True)
os._exit(0)
"""


def _seen(script: str, *args: str) -> dict:
    try:
        done = subprocess.run([PY, "-c", script, *args], capture_output=True, timeout=SAFETY_NET)
    except subprocess.TimeoutExpired:
        raise AssertionError("a call hung") from None
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


@pytest.mark.parametrize("opener", [[], ["another", "no thread"]])
@pytest.mark.parametrize("point", ["read", "filing"])
def test_a_handler_waiting_on_an_older_handle_as_its_thread_reads_is_refused_never_hung(point, opener):
    """Interrupted as a read returned (the reader), or as a reply was filed (the mailbox's lock held:
    the handler's wait blocked on that lock, its own thread's): the older run the main thread's own,
    or another thread's where no thread can start for the read."""
    seen = _seen(OLDER, point, *opener)
    assert seen["refused"] == [100, "usage", True, point == "filing"], "a usage failure with a code, saying why"
    assert seen["polled"] is None, "a look still answers: no reply is filed yet"
    assert seen["looked"], "wait(timeout=0) is a look too: TimeoutExpired, as Popen's"
    assert seen["outer"] == "outer\n", "the interrupted call completes"
    assert seen["older"] == 0, "the older run is waited for once the handler returned"
    assert seen["after"] == "after\n"


@pytest.mark.parametrize("point", ["read", "filing"])
def test_a_handler_waiting_on_an_older_handle_is_answered_by_the_read_of_a_thread_of_its_own(point):
    """The older handle open, the main thread's read is a thread's of its own: the handler's wait is
    answered by that read, and the interrupted call completes."""
    seen = _seen(OLDER, point, "another")
    assert seen == {"waited": 0, "polled": 0, "outer": "outer\n", "older": 0, "after": "after\n"}


@pytest.mark.parametrize("point", ["read", "received"])
def test_a_second_interruption_as_a_cut_read_is_given_up_retires_the_connection(point):
    """The first interruption as the socket call returns, or as its frames are handed back (parsed,
    held only by the read until it files them: the stream was marked whole there, and the connection
    kept in use with the replies lost)."""
    seen = _seen(TWICE, point)
    assert seen == {"interrupted": True, "after": "after\n", "new_service": True, "first_ended": True}


@pytest.mark.parametrize("handles", [[], ["second"]])
def test_an_interruption_as_a_call_becomes_the_reader_leaves_the_socket_read_by_later_calls(handles):
    """The reader's role was given back only around the read itself: taken and then interrupted
    before it, no thread read the socket again, and every later call slept for ever."""
    seen = _seen(TAKEN, *handles)
    assert seen == {"interrupted": True, "after": "after\n", "older": 0}


# A handler that tells a run to stop (``RunHandle.close()``'s way where no control plane answers:
# the connection's ``signal``) as its own thread's read of the socket is under way.
STOPS = (
    ARMED
    + r"""
older = processkit.start(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
first = shared.connection()
signal.signal(signal.SIGUSR1, lambda *_: older._connection.signal(older._rid, "sigterm"))
armed[0] = True
seen = {"outer": processkit.run(["echo", "outer"], capture_output=True).stdout.decode()}
seen["older_ended"] = older.wait() != 0
seen["same_service"] = shared.connection() is first and not first.gone
print(json.dumps(seen), flush=True)
os._exit(0)
"""
)


def test_a_handler_stopping_a_run_as_its_thread_reads_keeps_the_connection():
    """The read's own mark of a read under way was taken for a read cut short: the connection retired
    (its service and every run on it ended) under a handler that only asked for one run's stop."""
    seen = _seen(STOPS, "read")
    assert seen == {"outer": "outer\n", "older_ended": True, "same_service": True}


# An event loop's reader callback (``read_now``) interrupted as it takes the reader's role: the
# mailbox's lock wrapped so a signal lands as the first block under it is left.
READ_NOW = r"""
import json, os, signal, threading, processkit
from processkit.api import shared

class Interrupted(Exception):
    pass

signal.signal(signal.SIGUSR1, lambda *_: (_ for _ in ()).throw(Interrupted()))
processkit.run(["true"])
conn = shared.connection()
real = conn._mail
armed = [True]

class Mail:
    def __enter__(self):
        return real.__enter__()

    def __exit__(self, *exc):
        real.__exit__(*exc)
        if armed[0]:
            armed[0] = False
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)

    def __getattr__(self, name):
        return getattr(real, name)

conn._mail = Mail()
seen = {}
try:
    conn.read_now()
except Interrupted:
    seen["interrupted"] = True
seen["reader_left"] = conn._reading != 0

def other():
    seen["other"] = processkit.run(["echo", "other"], capture_output=True).stdout.decode()

thread = threading.Thread(target=other)
thread.start()
thread.join()
seen["same"] = processkit.run(["echo", "same"], capture_output=True).stdout.decode()
print(json.dumps(seen), flush=True)
os._exit(0)
"""


def test_an_interruption_as_read_now_takes_the_reader_role_gives_it_back():
    seen = _seen(READ_NOW)
    assert seen == {"interrupted": True, "reader_left": False, "other": "other\n", "same": "same\n"}
