"""A caller that re-enters the API on the thread already in a call (a signal handler), or that
closed every descriptor between calls: each call still completes, in a process of its own."""

from __future__ import annotations

import subprocess
import sys

SAFETY_NET = 120  # seconds: a hang fails the test, never the suite

HANDLER = """
import os, signal, processkit
processkit.run(["true"])
got = []
# the child signals the caller while the caller waits in run(), then waits for the handler's run
# to have ended (its mark file) before it ends itself: the handler runs inside the outer call
mark = os.path.join(os.environ["SCRATCH"], "handled")
script = f"kill -USR1 {os.getpid()}; while [ ! -e {mark} ]; do sleep 0.01; done; echo outer"
def handler(*_):
    got.append(processkit.run(["sh", "-c", f"echo handler; touch {mark}"], capture_output=True).stdout)
signal.signal(signal.SIGUSR1, handler)
outer = processkit.run(["sh", "-c", script], capture_output=True)
after = processkit.run(["echo", "after"], capture_output=True)
print(outer.stdout, got, after.stdout)
"""

CLOSED = """
import os, socket, processkit
processkit.run(["true"])
os.closerange(3, 65536)  # the service's socket too: its number is free for the caller's next open
spare = socket.socketpair()  # holds the freed numbers, so the old number now names this socket
first = processkit.run(["echo", "first"], capture_output=True)
second = processkit.run(["echo", "second"], capture_output=True)
spare[1].setblocking(False)
try:
    stray = spare[1].recv(1 << 16)
except BlockingIOError:
    stray = b""
print(first.stdout, second.stdout, len(stray))
"""


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
        env={**__import__("os").environ, "SCRATCH": str(tmp_path)},
    )


def test_a_signal_handler_that_calls_run_inside_a_run_completes_both(tmp_path):
    done = _run(HANDLER, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "b'outer\\n' [b'handler\\n'] b'after\\n'"


def test_a_caller_that_closed_every_descriptor_gets_a_new_service_and_its_reused_number_untouched(tmp_path):
    done = _run(CLOSED, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "b'first\\n' b'second\\n' 0"
