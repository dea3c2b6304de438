"""A runner service that never says hello (its start blocked: an import on a hung file system, a
tracer's stop its caller leaves alone) held its caller's ``processkit.run`` for ever: the hello
was waited for with no timeout. The caller now waits ``service.HELLO_SECONDS``, then kills and
collects the service and raises ``ServiceUnstartable``, whose message says what happened."""

from __future__ import annotations

import subprocess
import sys

# The caller, its service's command replaced by one that keeps the socket open and never speaks
# (it ends when its caller's end closes: no orphan where the caller was killed by the timeout).
CALLER = r"""
import os, sys, time
import processkit
from processkit.api import service

service.HELLO_SECONDS = 1.0
service.service_command = lambda fd, caller: [sys.executable, "-c", "import os, sys; os.read(int(sys.argv[1]), 1)", str(fd), str(caller)]
started = time.monotonic()
try:
    processkit.run(["true"])
    print("ran")
except service.ServiceUnstartable as exc:
    print("raised", exc)
    said = str(exc)
print("took", round(time.monotonic() - started))
pid = int(said.split("(pid ")[1].split(")")[0])
try:
    os.kill(pid, 0)
    print("service alive")
except ProcessLookupError:
    print("service gone")  # killed and collected: no zombie (a zombie still takes signal 0)
"""


def test_a_service_that_never_says_hello_is_killed_and_the_call_raises():
    done = subprocess.run([sys.executable, "-c", CALLER], capture_output=True, timeout=30, text=True)
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()
    assert said[0].startswith("raised the runner service (pid ") and "did not say hello within 1 s" in said[0], said
    assert said[1] in ("took 1", "took 2") and said[2] == "service gone", said
