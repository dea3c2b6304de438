"""A burst of calls from many threads under a low open-file limit: the service admitted every
queued run in one pass before any opened a file, so runs went past the limit (failing at their
set-up, or at their spawn as the program's own ``OSError``), and the idle groups the burst left
in its pool kept so many files open that every later call of the process was refused (111)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

PY = sys.executable
LIMIT = 256

# Every thread makes its call at once, each run's child held on one pipe until every call has
# either run (its child's line read) or answered, so the admitted runs are all in flight
# together; then the pipe closes, the runs end, and the process calls again.
BURST = r"""
import json, os, select, sys, threading, traceback, processkit
CALLS = 48
here = sys.argv[1]
hold, told = os.path.join(here, "hold"), os.path.join(here, "told")
os.mkfifo(hold)
os.mkfifo(told)
hold_fd = os.open(hold, os.O_RDWR)  # each run's child reads it to its end: held until it closes
told_fd = os.open(told, os.O_RDWR)  # each run's child writes a line there once it holds
# No descriptor goes with a call (one that does is read alone): the burst's requests come in
# together, as calls without streams of their own do.
child = f"exec 3<{hold}; echo ran >{told}; exec cat <&3 >/dev/null"
processkit.run(["true"])
gate = threading.Barrier(CALLS)
seen = {"started": 0, "refused": 0, "raised": []}
answered = threading.Semaphore(0)  # one per call refused or failed (a started one says so on told)
lock = threading.Lock()
def call():
    gate.wait()
    try:
        result = processkit.run(["sh", "-c", child])
    except OSError as exc:
        with lock:
            seen["raised"].append(f"{exc!r} at {traceback.extract_tb(exc.__traceback__)[-1].name}")
        answered.release()
        return
    with lock:
        if result.returncode == 0:
            seen["started"] += 1
            return
        if result.returncode == 111 and "open-file limit" in (result.message or ""):
            seen["refused"] += 1
        else:
            seen["raised"].append(f"{result.returncode} {result.message}")
    answered.release()
threads = [threading.Thread(target=call) for _ in range(CALLS)]
for thread in threads:
    thread.start()
ran, ended = 0, 0
while ran + ended < CALLS:  # every call either holds (its line read) or has answered
    if select.select([told_fd], [], [], 0.05)[0]:
        ran += os.read(told_fd, 4096).count(b"ran")
    while answered.acquire(blocking=False):
        ended += 1
os.close(hold_fd)
for thread in threads:
    thread.join()
later = [processkit.run(["true"]) for _ in range(3)]
seen["later"] = [[r.returncode, r.message] for r in later]
print(json.dumps(seen))
"""


def _low_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


@pytest.mark.skipif(
    resource.getrlimit(resource.RLIMIT_NOFILE)[1] < LIMIT, reason=f"the hard open-file limit is below {LIMIT}"
)
def test_a_burst_of_calls_under_a_low_limit_is_admitted_within_it_and_leaves_room_after(tmp_path):
    done = subprocess.run([PY, "-c", BURST, str(tmp_path)], capture_output=True, timeout=300, preexec_fn=_low_limit)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["raised"][:2] == [], "a run past the limit failed at its set-up or its spawn"
    assert seen["started"] >= 1 and seen["started"] + seen["refused"] == 48
    assert seen["later"] == [[0, None]] * 3, "the calls after the burst run"
