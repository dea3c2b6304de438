"""A signal handler that calls ``processkit.run`` under a fast interval timer: each tick that
interrupts a handler's call while its spare service starts nests one call deeper. Each depth
started a spare service of its own (22 to 54 alive for the thread's life, RecursionError in the
handlers, a start's hello waited past its 30 s under the handlers above it); now a thread keeps
at most ``reentry.SPARES_MOST`` spares and a deeper call is refused in one line, and every
service ends with its caller. A handler slower than the tick (a loaded host) still nests in
Python before its call reaches the service (``RecursionError``), as any such handler does."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from conftest import SAFETY_NET, pid_alive

from processkit.api.reentry import SPARES_MOST

TIMED = r"""
import json, os, signal, time, processkit
processkit.run(["true"])  # the API loaded before the timer: its import is not what a tick interrupts
said = {}
def handler(*_):
    try:
        processkit.run(["true"])
        key = "ran"
    except Exception as exc:  # noqa: BLE001 - every outcome counted
        key = f"{type(exc).__name__}: {exc}"
    said[key] = said.get(key, 0) + 1

def services():
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                words = cmdline.read().split(b"\0")
        except OSError:
            continue
        if b"from processkit.service.serve import main; main()" in words and words[-2] == str(os.getpid()).encode():
            found.append(int(entry))
    return found

signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
end = time.monotonic() + 2
while time.monotonic() < end:
    processkit.run(["true"])
signal.setitimer(signal.ITIMER_REAL, 0, 0)
print(json.dumps({"said": said, "services": services()}))
"""


def test_handlers_nesting_under_a_fast_timer_keep_a_bounded_number_of_services(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", TIMED], capture_output=True, text=True, timeout=4 * SAFETY_NET, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert 1 <= len(report["services"]) <= 1 + SPARES_MOST, report  # the shared one and the spares
    assert "ran" in report["said"], report["said"]
    for said in report["said"]:  # a handler slower than the tick (a loaded host) still nests in Python: RecursionError
        assert not said.startswith("Failure") or said.startswith("Failure: a call made "), said
        assert "ServiceUnstartable" not in said and "\n" not in said, said
    deadline = time.monotonic() + SAFETY_NET
    while any(map(pid_alive, report["services"])) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(pid_alive, report["services"])), report["services"]  # each ended with its caller
