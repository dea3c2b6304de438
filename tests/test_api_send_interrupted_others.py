"""A signal handler that raises in the main thread (Ctrl-C's KeyboardInterrupt) as that thread's
request is written: the frame was left whole or cut, nobody knew which, so the connection was given
up and its service ended every run it carried, another thread's ``start()``ed run with the
interrupted call (its handle's ``communicate`` raising ``ServiceGone``). While a call another thread
opened is open, the main thread's request is now written by a thread of its own (``api.relay.written``)
and the interruption raised once the frame is whole: it ends the main thread's call alone."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

PY = sys.executable
SENDTO = {"x86_64": 44, "aarch64": 206}.get(platform.machine())

# Another thread's run is in flight; the service is stopped, so the main thread's large request
# (distinct argument strings: pickle writes a repeated one once) fills the socket and its write
# blocks; the interrupter waits for a thread blocked in sendto (what /proc says each is in), sends
# SIGINT to the main thread and continues the service ("continued"), or nobody does ("stopped":
# the wait for the write continues it, as a wait for a reply does, so the Ctrl-C is not held for
# ever). "wedged": nothing continues the service (as a tracer's stop, which is left alone), and a
# second SIGINT, sent once the first was handled, gives the connection up as before. "after": no
# stop; a handler raises as the wait for the whole frame ends (``relay.written`` returns).

# Whether a thread of the calling script is in sendto (what /proc says each is in): its SENDTO.
BLOCKED_IN_SEND = r"""
import os

def blocked_in_send() -> bool:
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/syscall") as found:
                if found.read().split()[0] == str(SENDTO):
                    return True
        except (OSError, IndexError):
            pass
    return False
"""

CALLER = (
    BLOCKED_IN_SEND
    + r"""
import json, os, signal, subprocess, sys, threading, processkit
from processkit.api import shared

SENDTO, MODE = int(sys.argv[1]), sys.argv[2]
if MODE == "wedged":
    from processkit.api import stopped
    stopped.look = lambda connection: None
    handled = threading.Event()

    def handler(signum, frame):
        handled.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
if MODE == "after":
    from processkit.api import relay
    plain_written = relay.written

    def written(*args):
        plain_written(*args)
        raise KeyboardInterrupt  # as a handler would as the wait ends

    relay.written = written
first = processkit.run(["true"]).runner_pid
connection = shared.connection()
held = []
opened = threading.Event()
read_end, write_end = os.pipe()

def other():
    handle = processkit.start(["sh", "-c", "read line; echo released"], stdin=read_end, stdout=subprocess.PIPE)
    opened.set()
    try:
        out, _ = handle.communicate(timeout=60)
        held.append([handle.returncode, out.decode(), handle.runner_pid == first])
    except Exception as exc:
        held.append(type(exc).__name__)

thread = threading.Thread(target=other)
thread.start()
opened.wait()
pid = connection.process.pid
if MODE != "after":
    os.kill(pid, signal.SIGSTOP)
    os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOWAIT)

def interrupt():
    if MODE == "after":
        return
    while not blocked_in_send():
        os.sched_yield()
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    if MODE == "continued":
        os.kill(pid, signal.SIGCONT)
    if MODE == "wedged":
        handled.wait()
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

interrupter = threading.Thread(target=interrupt)
interrupter.start()
try:
    own = processkit.run(["sh", "-c", "sleep 3600", *[str(i) * 60000 for i in range(10)]]).returncode
except KeyboardInterrupt:
    own = "KeyboardInterrupt"
interrupter.join()
os.write(write_end, b"go\n")
os.close(write_end)
thread.join()
after = processkit.run(["sh", "-c", "echo ok"], capture_output=True)
print(json.dumps({"own": own, "held": held[0], "after": [after.returncode, after.stdout.decode(), after.runner_pid == first]}))
"""
)


@pytest.mark.skipif(SENDTO is None, reason="the sendto system call's number on this machine")
@pytest.mark.parametrize("mode", ["continued", "stopped", "after"])
def test_the_main_threads_interruption_as_its_request_is_written_ends_no_run_of_another_thread(mode):
    seen = seen_in(mode)
    assert seen["own"] == "KeyboardInterrupt", "the interrupted call raised its interruption"
    assert seen["held"] == [0, "released\n", True], "the other thread's run went on, on the same service"
    assert seen["after"] == [0, "ok\n", True], "the next call runs on the same service"


@pytest.mark.skipif(SENDTO is None, reason="the sendto system call's number on this machine")
def test_a_second_interruption_as_a_write_the_service_never_reads_waits_gives_the_connection_up():
    """Every Ctrl-C was held while the write waited: a service nobody continues held the call for ever."""
    seen = seen_in("wedged")
    assert seen["own"] == "KeyboardInterrupt", "the interrupted call raised its interruption"
    assert seen["held"] == "ServiceGone", "the connection was given up: its service ended the other thread's run"
    assert seen["after"] == [0, "ok\n", False], "the next call runs on a new service"


def seen_in(mode: str) -> dict:
    done = subprocess.run([PY, "-c", CALLER, str(SENDTO), mode], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)
