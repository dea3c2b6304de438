"""A child that stops the runner service (SIGSTOP to its parent, which nothing catches) no
longer hangs every call of its caller: a call whose reply has not come looks at its service
and continues it (SIGCONT), since the caller owns it and did not stop it. The stopping run's
own call, and another thread's call in flight beside it, both get their replies. Should the
service stay stopped (the check against the unfixed code), the test continues it itself: no
stopped process is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

PY = sys.executable

CALLER = r"""
import json, sys, threading, processkit
service = processkit.run(["true"]).runner_pid
print(service, flush=True)
seen = {}
def beside():
    result = processkit.run(["sh", "-c", "read line; echo beside"], input=b"x\n", capture_output=True)
    seen["beside"] = [result.returncode, result.stdout.decode()]
thread = threading.Thread(target=beside)
thread.start()
stopping = processkit.run(["sh", "-c", "kill -STOP $PPID; echo after"], capture_output=True, timeout=30)
seen["stopping"] = [stopping.returncode, stopping.stdout.decode(), stopping.runner_pid == service]
thread.join()
seen["next"] = processkit.run(["true"]).runner_pid == service
print(json.dumps(seen), flush=True)
"""


def test_a_service_stopped_by_its_child_is_continued_by_the_waiting_call():
    caller = subprocess.Popen([PY, "-c", CALLER], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert caller.stdout is not None
    service = int(caller.stdout.readline())
    try:
        out, err = caller.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.kill(service, signal.SIGCONT)  # the service this test's caller started, left stopped
        out, err = caller.communicate(timeout=60)
        raise AssertionError("the calls hung on the stopped service") from None
    assert caller.returncode == 0, err.decode()
    seen = json.loads(out)
    assert seen["stopping"] == [0, "after\n", True]
    assert seen["beside"] == [0, "beside\n"]
    assert seen["next"] is True


ASYNC_CALLER = r"""
import asyncio, json, processkit
async def main():
    service = (await processkit.run_async(["true"])).runner_pid
    print(service, flush=True)
    result = await processkit.run_async(["sh", "-c", "kill -STOP $PPID; echo after"], capture_output=True)
    return [result.returncode, result.stdout.decode(), result.runner_pid == service]
print(json.dumps(asyncio.run(main())), flush=True)
"""


def test_an_awaited_call_continues_its_stopped_service_too():
    caller = subprocess.Popen([PY, "-c", ASYNC_CALLER], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert caller.stdout is not None
    service = int(caller.stdout.readline())
    try:
        out, err = caller.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.kill(service, signal.SIGCONT)  # the service this test's caller started, left stopped
        out, err = caller.communicate(timeout=60)
        raise AssertionError("the awaited call hung on the stopped service") from None
    assert caller.returncode == 0, err.decode()
    assert json.loads(out) == [0, "after\n", True]
