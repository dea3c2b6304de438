"""A signal handler that raises in the main thread (Ctrl-C's KeyboardInterrupt, a SIGTERM handler
that raises) as that thread's read of the shared socket returned dropped the bytes it read: the
connection was given up and its service ended every run it carried, another thread's ``start()``ed
run (its child killed, its handle's ``wait`` raising ``ServiceGone``) with the interrupted call.
While a call another thread opened is open, the main thread's read is now a thread's of its own
(``api.relay``): the interruption ends the main thread's call alone; a caller whose open calls are
all its own starts no such thread. So did one as a request's frame was being made
(its pickle), before any byte of it was written: the connection is now kept.

A capture larger than a reply carries inline is handed to the caller as a file of the service's
scratch directory (in memory, on a tmpfs), which the caller reads once and removes: an
interruption after the reply came but before that file was read left it there until the process
ended (each such Ctrl-C kept a whole capture in memory); it is now removed as the interruption
goes on, and with a reply that comes to nobody (a second Ctrl-C as the first one's release was
awaited)."""

from __future__ import annotations

import pytest
from test_api_suspended_reader import _seen

# The signal is sent to the main thread as a read of the large reply returns, in whichever thread
# made it (before, that was the main thread itself), or ("request") as the main thread's run
# request is pickled.
CALLER = r"""
import json, pickle, signal, socket, subprocess, sys, threading, processkit
from processkit.api import shared

class Interrupted(Exception):
    pass

main = threading.get_ident()
signal.signal(signal.SIGUSR1, lambda number, frame: (_ for _ in ()).throw(Interrupted()))
handles = []
other = threading.Thread(target=lambda: handles.append(processkit.start(
    ["sh", "-c", "echo up; read line; echo got $line"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)))
other.start()
other.join()
handle = handles[0]
seen = {"up": handle.stdout.readline().decode()}
armed = [True]
plain = socket.socket.recvmsg

def recvmsg(self, *args):
    got = plain(self, *args)
    if armed[0] and len(got[0]) >= 1 << 16:
        armed[0] = False
        signal.pthread_kill(main, signal.SIGUSR1)  # the handler raises as soon as the main thread runs
    return got

plain_dumps = pickle.dumps

def dumps(message, *args, **kwargs):
    got = plain_dumps(message, *args, **kwargs)
    if armed[0] and message[0] == "run" and threading.get_ident() == main:
        armed[0] = False
        signal.pthread_kill(main, signal.SIGUSR1)
    return got

if sys.argv[1] == "request":
    pickle.dumps = dumps
else:
    socket.socket.recvmsg = recvmsg
connection = shared.connection()
try:
    processkit.run(["head", "-c", "900000", "/dev/zero"], capture_output=True)
    seen["main"] = "completed"
except Interrupted:
    seen["main"] = "interrupted"
try:
    handle.stdin.write(b"on\n")
    handle.stdin.close()
    seen["other"] = [handle.stdout.read().decode(), handle.wait()]
except Exception as exc:
    seen["other"] = repr(exc)
seen["same_service"] = shared.connection() is connection and not connection.gone
seen["next"] = processkit.run(["sh", "-c", "echo next"], capture_output=True).stdout.decode()
print(json.dumps(seen), flush=True)
"""


@pytest.mark.parametrize("point", ["read", "request"])
def test_the_main_threads_interruption_ends_no_run_of_another_thread(point):
    seen = _seen(CALLER, point)
    assert seen["up"] == "up\n"
    assert seen["main"] == "interrupted", "the interruption reached the main thread's call"
    assert seen["other"] == ["got on\n", 0], "the other thread's run went on to its end"
    assert seen["same_service"], "the connection and its service were kept"
    assert seen["next"] == "next\n"


# The signal is sent as the result is being built from the reply, before its captures are read.
SPILLED = r"""
import json, os, signal, threading, processkit
from processkit.api import result, shared

class Interrupted(Exception):
    pass

main = threading.get_ident()
signal.signal(signal.SIGUSR1, lambda number, frame: (_ for _ in ()).throw(Interrupted()))
plain = result.captures
armed = [True]

def captures(*args):
    if armed[0]:
        armed[0] = False
        signal.pthread_kill(main, signal.SIGUSR1)  # the handler raises as soon as the main thread runs
    return plain(*args)

result.captures = captures
seen = {}
try:
    processkit.run(["head", "-c", "3000000", "/dev/zero"], capture_output=True)
except Interrupted:
    seen["interrupted"] = True
scratch = shared.connection().scratch
seen["left"] = sorted(os.listdir(scratch))
seen["after"] = len(processkit.run(["head", "-c", "3000000", "/dev/zero"], capture_output=True).stdout)
print(json.dumps(seen), flush=True)
"""


def test_an_interruption_before_a_large_capture_is_read_leaves_no_file_behind():
    assert _seen(SPILLED) == {"interrupted": True, "left": [], "after": 3000000}


# Which reads went to a relay thread (the wait each was for), as the main thread runs "sync" runs or
# "async" runs (several open at once), while a started run of its "own" or of "another" thread is open.
RELAYED = r"""
import asyncio, json, subprocess, sys, threading, processkit
from processkit.api import relay

waits = []
plain = relay.read

def read(turn, wait):
    waits.append(wait)
    return plain(turn, wait)

relay.read = read
mode, opener = sys.argv[1:]
handles = []
started = lambda: handles.append(processkit.start(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL))
if opener == "own":
    started()
else:
    other = threading.Thread(target=started)
    other.start()
    other.join()
if mode == "sync":
    codes = [processkit.run(["true"]).returncode for _ in range(5)]
else:
    async def runs():
        return [r.returncode for r in await asyncio.gather(*(processkit.run_async(["true"]) for _ in range(5)))]
    codes = asyncio.run(runs())
handles[0].stdin.close()
print(json.dumps({"codes": codes, "relayed": len(waits), "at_once": waits.count(0), "ended": handles[0].wait()}))
"""


def test_a_caller_with_only_its_own_calls_open_reads_in_its_own_thread():
    """One thread starting a run then running others pays no thread a read (before: one each)."""
    assert _seen(RELAYED, "sync", "own") == {"codes": [0] * 5, "relayed": 0, "at_once": 0, "ended": 0}
    seen = _seen(RELAYED, "sync", "another")
    assert seen["relayed"] > 0, "another thread's run open: the main thread's reads are relayed"


def test_an_event_loops_look_at_once_is_never_relayed():
    """``run_async``'s look with no wait (on the loop's thread) reads there: its reader callback does anyway."""
    seen = _seen(RELAYED, "async", "another")
    assert seen["codes"] == [0] * 5 and seen["at_once"] == 0 and seen["ended"] == 0


# A second Ctrl-C as the first one's release is awaited: the run forgets its request, and the
# release's reply (a large capture, spilled to a file) comes later to nobody.
FORGOTTEN = r"""
import json, os, processkit
from processkit.api import launch, shared

forgotten = []

def released(connection, rid):
    forgotten.append(rid)
    raise KeyboardInterrupt  # the second Ctrl-C

launch._released = released
connection = shared.connection()
filed = []
plain_file = connection._sleeping.file

def file(messages, boxes, woken):
    filed.extend(m[1] for m in messages)
    return plain_file(messages, boxes, woken)

connection._sleeping.file = file
seen = {}
try:
    processkit.run(["sh", "-c", f"head -c 3000000 /dev/zero; kill -INT {os.getpid()}; exec sleep 3600"], capture_output=True)
except KeyboardInterrupt:
    seen["interrupted"] = True
while forgotten[0] not in filed:  # the release's reply, read by later calls
    processkit.run(["true"])
seen["left"] = sorted(os.listdir(connection.scratch))
print(json.dumps(seen), flush=True)
"""


def test_a_reply_nobody_waits_for_leaves_no_file_behind():
    assert _seen(FORGOTTEN) == {"interrupted": True, "left": []}


# The main thread reads for its own call alone (no other request open), then another thread starts
# a run while that read waits; the signal is sent to the main thread as its reply's read returns.
OPENED_DURING = r"""
import json, os, signal, socket, subprocess, threading, processkit

class Interrupted(Exception):
    pass

main = threading.get_ident()
signal.signal(signal.SIGUSR1, lambda number, frame: (_ for _ in ()).throw(Interrupted()))
release_read, release_write = os.pipe()
up_read, up_write = os.pipe()
handles, armed = [], [False]
plain = socket.socket.recvmsg

def recvmsg(self, *args):
    got = plain(self, *args)
    if armed[0] and got[0]:
        armed[0] = False
        signal.pthread_kill(main, signal.SIGUSR1)  # the handler raises as soon as the main thread runs
    return got

socket.socket.recvmsg = recvmsg

def other():
    os.read(up_read, 3)  # the main thread's child is up: the main thread reads for it
    handles.append(processkit.start(
        ["sh", "-c", "echo up; read line; echo got $line"], stdin=subprocess.PIPE, stdout=subprocess.PIPE))
    armed[0] = True
    os.write(release_write, b"go\n")  # the main thread's run ends: its reply comes

thread = threading.Thread(target=other)
thread.start()
seen = {}
try:
    processkit.run(["sh", "-c", "echo up; read line"], stdin=release_read, stdout=up_write)
    seen["main"] = "completed"
except Interrupted:
    seen["main"] = "interrupted"
thread.join()
handle = handles[0]
try:
    seen["up"] = handle.stdout.readline().decode()
    handle.stdin.write(b"on\n")
    handle.stdin.close()
    seen["other"] = [handle.stdout.read().decode(), handle.wait()]
except Exception as exc:
    seen["other"] = repr(exc)
print(json.dumps(seen), flush=True)
"""


def test_a_request_another_thread_opens_as_the_main_thread_reads_is_not_ended_by_its_interruption():
    seen = _seen(OPENED_DURING)
    assert seen["main"] == "interrupted", "the interruption reached the main thread's call"
    assert seen["other"] == ["got on\n", 0], "the other thread's run went on to its end"
