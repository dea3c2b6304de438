"""A fork of a caller whose connection another thread was reading, or whose mailbox's lock another
thread held: the child inherits that state of threads it does not have. A new thread of the child
(glibc gives it the stack, and so the identity, of the parent's thread that is gone) was taken for the
suspended reader and refused as a signal handler's wait; the forking thread's wait slept for ever on the
lock a parent's thread held. A wait on the parent's service there is told it is gone (``ServiceGone``).
The forked child dies with its parent (``PR_SET_PDEATHSIG``): a hung wait ends with the timeout's kill."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import SAFETY_NET

FORKED = r"""
import ctypes, json, os, signal, subprocess, sys, threading, time, processkit
from processkit.api import shared

older = processkit.start(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
conn = shared.connection()
holding, forked = threading.Event(), threading.Event()

def reader():  # reads the socket for every waiter (nobody else waits)
    older.wait()

def holder():
    with conn._mail:
        holding.set()
        forked.wait()

other = threading.Thread(target=reader if sys.argv[1] == "reader" else holder)
other.start()
if sys.argv[1] == "reader":
    while conn._reading != other.ident:
        time.sleep(0.01)
else:
    holding.wait()
parent, prctl = os.getpid(), ctypes.CDLL(None, use_errno=True).prctl
pid = os.fork()
if pid == 0:
    # killed with its parent (the test's timeout kills the parent): a hung wait would outlive it
    prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the prctl
        os._exit(1)
    seen = {}

    def child():
        try:
            seen["waited"] = older.wait()
        except BaseException as exc:
            seen["raised"] = type(exc).__name__

    if sys.argv[1] == "reader":  # a new thread: the identity of the parent's reader (glibc's stack cache)
        thread = threading.Thread(target=child)
        thread.start()
        thread.join()
    else:  # the forking thread: the lock's holder is a thread of the parent's
        child()
    print(json.dumps(seen), flush=True)
    os._exit(0)
forked.set()
os.waitpid(pid, 0)
older.stdin.close()
other.join()
os._exit(0)
"""


@pytest.mark.parametrize("at_fork", ["reader", "holder"])
def test_a_childs_wait_on_the_parents_service_is_told_it_is_gone(at_fork):
    try:
        done = subprocess.run([sys.executable, "-c", FORKED, at_fork], capture_output=True, timeout=SAFETY_NET)
    except subprocess.TimeoutExpired:
        raise AssertionError("the child's wait hung") from None
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == {"raised": "ServiceGone"}


# A fork of a caller holding a started run's handle, whose child exits as an interpreter does (its
# finalizers run: the inherited handle's among them), or drops the handle, before the run ends.
LEFT = r"""
import gc, json, os, subprocess, sys, processkit

handle = processkit.start(["sh", "-c", "echo up; exec cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
assert handle.stdout.readline() == b"up\n"
pid = os.fork()
if pid == 0:
    if sys.argv[1] == "dropped":
        del handle
        gc.collect()
        os._exit(0)
    sys.exit(0)
os.waitpid(pid, 0)
handle.stdin.close()
events = [event.event for event in handle.events()]
print(json.dumps([handle.wait(), events]))
"""


@pytest.mark.parametrize("leaves", ["exits", "dropped"])
def test_a_forked_child_leaving_leaves_the_parents_run_stream(leaves):
    """The handle's finalizer removed its scratch stream in the child too: the parent's ``events()``
    then yielded nothing, its run's events lost without a word."""
    done = subprocess.run([sys.executable, "-c", LEFT, leaves], capture_output=True, timeout=SAFETY_NET)
    assert done.returncode == 0, done.stderr.decode()
    code, events = json.loads(done.stdout)
    assert (code, events[:1], events[-1:]) == (0, ["run_started"], ["runner_exit"]), events
