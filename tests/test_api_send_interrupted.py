"""A call interrupted while its request is being written (Ctrl-C during a large frame, its ``input=``: a
signal handler's exception raised out of ``sendall``) left part of a frame on the service's
socket: the service read every later frame from the wrong byte, and every later call of the
process, of every thread, hung. The connection is now given up (its service ends its runs
through their release) and the next call starts a fresh service; no thread writes a frame, so
a service that does not read (stopped) never holds the interruption back, and a handler that
raises again never leaves two writers on one socket."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

PY = sys.executable

# The service is stopped so the socket fills and the call's send blocks part-way through its
# frame; the main thread is then signalled there (its handler raises). Then a call from another
# thread, bounded so a hang is reported. TOKEN marks this run's child (other runs of the test
# may share the machine); MODE: "once" (one raising handler, the service continued once it
# ran), "storm" (a SIGALRM every 50 us for 0.2 s, its handler raising within the library), "stopped"
# (Ctrl-C, and nobody continues the service), "stopped-again" (as "stopped", and the service, once
# the call that gave it up continued it, stopped again: as a stop sent before that look but taking
# effect after it on a loaded host did).
CALLER = r"""
import json, os, select, signal, socket, subprocess, sys, threading, time, processkit
from processkit.api import shared, stopped
from processkit.api.given_input import INLINE_INPUT

TOKEN, MODE = sys.argv[1], sys.argv[2]
class Interrupted(Exception):
    pass

fired = threading.Event()
def handler(number, frame):  # raises only within the library (the storm's signals come anywhere)
    if "processkit" in frame.f_code.co_filename:
        fired.set()
        raise Interrupted()
signal.signal(signal.SIGUSR1, handler)
signal.signal(signal.SIGALRM, handler)
processkit.run(["true"])
connection = shared.connection()
# A send buffer well under the frame, whatever the host's default (net.core.wmem_default: one
# of 1 MiB or more took the whole frame, and the wait for a full socket never ended).
connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 10)
main = threading.get_ident()

def interrupt():
    while select.select([], [connection.sock], [], 0)[1]:  # until the send blocks: the socket is full
        select.select([], [], [], 0.01)
    if MODE.startswith("stopped"):
        signal.pthread_kill(main, signal.SIGINT)
        if MODE == "stopped-again":  # stopped again once the give-up continued it: it must still end
            pid, given = connection.process.pid, time.monotonic() + 60
            while stopped.state(pid) == b"T" and time.monotonic() < given:
                select.select([], [], [], 0.001)
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:  # it ended and was collected first: nothing left to stop
                pass
        return
    if MODE == "storm":
        signal.setitimer(signal.ITIMER_REAL, 0.00005, 0.00005)
    else:
        signal.pthread_kill(main, signal.SIGUSR1)
    fired.wait()
    if MODE == "storm":
        select.select([], [], [], 0.2)  # the storm goes on while the interruption is dealt with
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
    os.kill(connection.process.pid, signal.SIGCONT)

os.kill(connection.process.pid, signal.SIGSTOP)
helper = threading.Thread(target=interrupt)
helper.start()
seen = {}
try:
    # the largest input that travels inside the frame (a larger one is a memfd beside it)
    processkit.run(["sh", "-c", f"exec sleep 3737.{TOKEN}"], input=b"x" * INLINE_INPUT)
    seen["interrupted"] = False
except (Interrupted, KeyboardInterrupt):
    seen["interrupted"] = True
helper.join()
after = {}
def later():
    result = processkit.run(["sh", "-c", "echo after"], capture_output=True)
    after["result"] = [result.returncode, result.stdout.decode()]
thread = threading.Thread(target=later, daemon=True)
thread.start()
thread.join(60)
seen["after"] = after.get("result", "hung")
try:  # at once, unless a handler raised again while it was awaited
    seen["old_service_ended"] = connection.process.wait(60) is not None
except subprocess.TimeoutExpired:
    seen["old_service_ended"] = False
print(json.dumps(seen), flush=True)
os._exit(0)
"""


def interrupted_call(mode: str) -> dict:
    token = str(secrets.randbelow(10**9)).rjust(9, "1")
    done = subprocess.run([PY, "-c", CALLER, token, mode], capture_output=True, timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["interrupted"] is True, "the interruption reached the caller"
    assert seen["after"] == [0, "after\n"], "the next call ran (it hung on a frame read from the wrong byte)"
    assert seen["old_service_ended"], "the connection was given up: its service ended"
    leftover = subprocess.run(["pgrep", "-f", f"sleep 3737.{token}"], capture_output=True, text=True).stdout
    assert leftover == "", "the interrupted call's run was stopped"
    return seen


def test_a_call_interrupted_while_its_request_is_written_leaves_the_next_call_served():
    interrupted_call("once")


def test_a_handler_raising_again_and_again_during_a_large_send_leaves_later_calls_served():
    interrupted_call("storm")


def test_ctrl_c_interrupts_a_large_send_to_a_stopped_service():
    interrupted_call("stopped")


def test_a_service_stopped_again_after_a_ctrl_c_gave_it_up_still_ends_with_its_runs():
    interrupted_call("stopped-again")
