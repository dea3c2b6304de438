"""A runner service that ends (killed: its socket's end of file) while threads wait on it: the
thread that reads the end tells every other waiter (a thread asleep until its reply is filed,
an event loop's wake-up callback) before it waits to collect the service. Told after, they
waited out that collection (up to ``COLLECT_SECONDS``, ``HELLO_SECONDS`` for a connection given
up), or missed the wake-up a second Ctrl-C needs, while nothing was left to wait for."""

from __future__ import annotations

import json
import subprocess
import sys

TIMEOUT = 120  # the caller's own bound, far past what a right run takes

# The caller: two threads each in a run when its service is killed; whichever reads the end
# finds the service's process wrapped, so the collection's wait sees who was told by then.
CALLER = r"""
import json, os, signal, threading, processkit
from processkit.api import service, shared

service.COLLECT_SECONDS = 60.0  # a collection that comes first holds every other waiter this long
connection = shared.connection()
seen = {}
callback_told, thread_told = threading.Event(), threading.Event()


class Collected:
    '''The service's process: its wait records what its waiters knew by then.'''

    def __init__(self, process):
        self._process = process

    def __getattr__(self, name):
        return getattr(self._process, name)

    def wait(self, timeout=None):
        seen.setdefault("callback told before the wait", callback_told.is_set())
        seen.setdefault("the other thread told while the service is waited for", thread_told.wait(60))
        return self._process.wait(timeout)


connection.process = Collected(connection.process)
connection.wake(1 << 30, callback_told.set)  # as an event loop's call awaiting a reply registers
read_end, write_end = os.pipe()


def call(name):
    try:
        processkit.run(["sh", "-c", "echo up; exec sleep 3737.5"], stdout=write_end)
        seen[name] = "returned"
    except service.ServiceGone:
        seen[name] = "ServiceGone"
        thread_told.set()


threads = [threading.Thread(target=call, args=(name,)) for name in ("a", "b")]
for thread in threads:
    thread.start()
with os.fdopen(read_end, "rb") as ups:
    assert [ups.readline(), ups.readline()] == [b"up\n", b"up\n"]  # both runs started: both threads wait
os.kill(connection.process.pid, signal.SIGKILL)
for thread in threads:
    thread.join()
print(json.dumps(seen))
"""


def test_an_ended_service_tells_every_waiter_before_it_is_collected():
    done = subprocess.run([sys.executable, "-c", CALLER], capture_output=True, timeout=TIMEOUT, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "callback told before the wait": True,
        "the other thread told while the service is waited for": True,
        "a": "ServiceGone",
        "b": "ServiceGone",
    }


# An event loop's caller awaiting run_async when its service is killed: the run's stop is asked
# and its reply awaited again (shielded), on a connection whose socket is closed by then.
AWAITING = r"""
import asyncio, json, os, signal, processkit
from processkit.api import service


async def main():
    read_end, write_end = os.pipe()
    first = processkit.run(["true"]).runner_pid
    task = asyncio.ensure_future(processkit.run_async(["sh", "-c", "echo up; exec sleep 3737.5"], stdout=write_end))
    with os.fdopen(read_end, "rb") as ups:
        assert await asyncio.get_running_loop().run_in_executor(None, ups.readline) == b"up\n"
    os.kill(first, signal.SIGKILL)
    try:
        await task
        seen = "returned"
    except service.ServiceGone:
        seen = "ServiceGone"
    except Exception as exc:
        seen = type(exc).__name__ + ": " + str(exc)
    again = await processkit.run_async(["echo", "next"], capture_output=True)
    print(json.dumps([seen, again.stdout.decode(), again.runner_pid != first]))


asyncio.run(main())
"""


def test_a_service_killed_under_run_async_raises_service_gone():
    """Before, the shielded wait for the stopped run's reply added the loop's reader on the closed
    socket's -1: ``ValueError: Invalid file descriptor: -1`` in place of ``ServiceGone``."""
    from conftest import run_cli

    try:
        done = subprocess.run([sys.executable, "-c", AWAITING], capture_output=True, timeout=TIMEOUT, text=True)
    finally:  # the killed service's idle groups, which its successor's sweep spares for a grace
        pruned = run_cli("prune")
    assert pruned.returncode == 0, pruned.stderr
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["ServiceGone", "next\n", True]
