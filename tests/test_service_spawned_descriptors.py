"""A process the runner service starts for a batch or a benchmark (``spawned.start``) keeps
only the descriptors handed to it: the service received every caller's descriptors without
close-on-exec, so a batch started while another call's run was going held that call's pipe
(``h.stdout.read()`` waited for the batch to end, not for its own ``sh``)."""

from __future__ import annotations

import json
import subprocess
import sys

PY = sys.executable

# One thread's run holds the caller's stdout pipe in the service; another thread's batch is
# started then, its job telling it has begun (the ``up`` FIFO) and waiting for ``release``
# (a FIFO the caller opens only after its read, or its watchdog's after a minute).
CALLER = r"""
import json, os, subprocess, sys, threading, processkit

here = sys.argv[1]
os.chdir(here)
os.mkfifo("up")
os.mkfifo("release")
h = processkit.start(["sh", "-c", "read x; echo hi"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
lines = []
job = "echo up > up; cat release"
batch = threading.Thread(target=lambda: lines.extend(processkit.batch([{"args": ["sh", "-c", job], "id": "long"}], out="out")))
batch.start()
with open("up") as up:
    assert up.read() == "up\n"
released = threading.Event()

def release():
    released.set()
    with open("release", "w"):
        pass

watchdog = threading.Timer(60, release)
watchdog.start()
h.stdin.write(b"x\n")
h.stdin.close()
out = h.stdout.read()
read_while_batch_ran = not released.is_set()
watchdog.cancel()
if not released.is_set():
    release()
batch.join()
print(json.dumps({"out": out.decode(), "before_release": read_while_batch_ran,
                  "code": h.wait(), "batch": [line["exit_code"] for line in lines]}))
"""


def test_a_batch_started_beside_a_run_does_not_hold_its_pipe(tmp_path):
    done = subprocess.run([PY, "-c", CALLER, str(tmp_path)], capture_output=True, timeout=240)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["out"] == "hi\n"
    assert seen["before_release"], "the pipe read EOF when sh ended, while the batch still ran"
    assert seen["code"] == 0
    assert seen["batch"] == [0]
