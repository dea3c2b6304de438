"""Several threads waiting on one ``processkit.start`` handle at once, as ``subprocess.Popen.wait``
allows: the first to take the run's reply let its request go, and the other's wait raised
``KeyError`` from the connection (or slept for ever on a reply already taken). Each now has the
return code. The run is held (its child reads stdin) until one thread reads the service's socket
and the other sleeps for the reply, the order that lost."""

from __future__ import annotations

import subprocess
import threading

import pytest

import processkit
from conftest import SAFETY_NET
from processkit.api.launch import Call
from streams import wait_until


@pytest.mark.parametrize("second", ["wait", "wait_timeout", "communicate"])
def test_two_threads_waiting_on_one_handle_both_have_its_code(second):
    handle = processkit.start(["sh", "-c", "read line; exit 3"], stdin=subprocess.PIPE)
    connection, rid = handle._connection, handle._rid
    outcome: dict = {}

    def waited(name: str, call) -> None:
        try:
            outcome[name] = call()
        except BaseException as exc:  # the failure is the test's to report
            outcome[name] = exc

    calls = {
        "wait": handle.wait,
        "wait_timeout": lambda: handle.wait(timeout=SAFETY_NET),
        "communicate": lambda: handle.communicate()[0] or handle.returncode,
    }
    first = threading.Thread(target=waited, args=("first", handle.wait))
    first.start()
    assert wait_until(lambda: connection._reading, what="the first waiter reading the socket")
    other = threading.Thread(target=waited, args=("second", calls[second]))
    other.start()
    if second != "communicate":  # communicate closes stdin itself, then waits
        assert wait_until(lambda: rid in connection._sleeping, what="the second waiter asleep for the reply")
        handle.stdin.write(b"go\n")
        handle.stdin.close()
    first.join(SAFETY_NET)
    other.join(SAFETY_NET)
    assert outcome == {"first": 3, "second": 3}
    assert handle.returncode == 3


def test_waiters_after_terminate_all_return_the_one_result(monkeypatch):
    """Every waiter builds its result aside and the first kept wins: each returns that one object,
    its returncode Popen's -15. The waiters are held until all of them build, the order in which
    each once kept (and returned) its own, some with the service's 108."""
    waiters = 4
    built = threading.Barrier(waiters, timeout=SAFETY_NET)
    result = Call.result

    def held(call, report):
        built.wait()
        return result(call, report)

    monkeypatch.setattr(Call, "result", held)
    handle = processkit.start(["sh", "-c", "read line; exit 3"], stdin=subprocess.PIPE)
    returned: list = []
    threads = [threading.Thread(target=lambda: returned.append(handle.result())) for _ in range(waiters)]
    for thread in threads:
        thread.start()
    handle.terminate()
    for thread in threads:
        thread.join(SAFETY_NET)
    handle.stdin.close()
    assert len(returned) == waiters
    assert all(got is returned[0] for got in returned)
    assert returned[0].returncode == -15
