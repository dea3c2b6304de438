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
from conftest import SAFETY_NET

PY = sys.executable

CALLER = r"""
import json, subprocess, processkit
service = processkit.run(["true"]).runner_pid
print(service, flush=True)
beside = processkit.start(["sh", "-c", "read line; echo beside"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
stopping = processkit.run(["sh", "-c", "kill -STOP $PPID; echo after"], capture_output=True, timeout=60)
out, _ = beside.communicate(b"x\n")
print(json.dumps({
    "stopping": [stopping.returncode, stopping.stdout.decode(), stopping.runner_pid == service],
    "beside": [beside.returncode, out.decode()],
    "next": processkit.run(["true"]).runner_pid == service,
}), flush=True)
"""


def _outcome(script: str):
    """What the caller ``script`` printed last; should the calls hang on the stopped service,
    it is continued here (the service the caller started and printed first), then it fails."""
    caller = subprocess.Popen([PY, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert caller.stdout is not None
    service = int(caller.stdout.readline())
    try:
        out, err = caller.communicate(timeout=SAFETY_NET)
    except subprocess.TimeoutExpired:
        os.kill(service, signal.SIGCONT)
        caller.communicate(timeout=60)
        raise AssertionError("the calls hung on the stopped service") from None
    assert caller.returncode == 0, err.decode()
    return json.loads(out)


def test_a_service_stopped_by_its_child_is_continued_by_the_waiting_call():
    seen = _outcome(CALLER)
    assert seen["stopping"] == [0, "after\n", True]
    assert seen["beside"] == [0, "beside\n"], "a run in flight beside it ends as it would"
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
    assert _outcome(ASYNC_CALLER) == [0, "after\n", True]


POLLING_CALLER = r"""
import json, subprocess, processkit
service = processkit.run(["true"]).runner_pid
print(service, flush=True)
handle = processkit.start(["sh", "-c", "kill -STOP $PPID; echo after"], stdout=subprocess.PIPE)
while True:  # never one wait as long as the look's WATCH_SECONDS
    try:
        handle.wait(timeout=0.3)
        break
    except subprocess.TimeoutExpired:
        pass
print(json.dumps([handle.returncode, handle.stdout.read().decode(), handle.runner_pid == service]), flush=True)
"""


def test_a_caller_polling_in_short_waits_continues_its_stopped_service():
    """The look came only after one wait of ``WATCH_SECONDS`` with nothing read: a caller that
    waits in shorter slices (``wait(timeout=0.3)`` in a loop, as ``poll()`` does with none) never
    made one, and its stopped service stayed stopped. The time since a frame last came counts now."""
    assert _outcome(POLLING_CALLER) == [0, "after\n", True]
