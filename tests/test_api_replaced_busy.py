"""A ``processkit.batch()`` or ``processkit.bench()`` running in one thread while another makes
the shared connection unusable (here: a new TMPDIR, then a call): the replaced service still
carries the batch or benchmark, so it is not retired as idle, and the batch ends normally. Each
forgot its request id right after sending, so its service counted as idle and was retired: the
service serves its batches until they end, so the batch survived, but the replacing call waited
out ``COLLECT_SECONDS`` (1 s) for a service that could not end before the batch did. Once the
batch or benchmark is answered, the replaced service is retired and collected: no zombie, no
``ResourceWarning`` for a Popen dropped while its service ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

# The call runs in a thread, its command waiting on the FIFO; once its reader has the FIFO open,
# the main thread moves TMPDIR and makes a call (a fresh service), then lets the command end.
SCRIPT = r"""
import json, os, sys, threading
sys.path.insert(0, {here!r})
import processkit
from processkit.api import service, shared
service.COLLECT_SECONDS = 60.0  # a loaded machine's slow exit is waited for: only a missed retire fails
from fifo_ends import opened_for_writing

fifo, other, which = sys.argv[1], sys.argv[2], sys.argv[3]
got = {{}}

def call():
    try:
        if which == "batch":
            lines = processkit.batch([{{"id": "a", "args": ["cat", fifo]}}], out=sys.argv[4])
            got["codes"] = [line["exit_code"] for line in lines]
        else:
            result = processkit.bench([["cat", fifo]], runs=1, shell="none")
            got["codes"] = [len(result.results)]
    except BaseException as exc:
        got["raised"] = f"{{type(exc).__name__}}: {{exc}}"

thread = threading.Thread(target=call)
thread.start()
fd = opened_for_writing(fifo, what="the job's cat")
old = shared.connection()
os.environ["TMPDIR"] = other
processkit.run(["true"])
got["retired"] = old.gone  # the caller's end let go: the replacing call waited for its end
try:
    os.write(fd, b"go\n")
finally:
    os.close(fd)
thread.join()
got["collected"] = old.process.returncode is not None  # its last call done: retired, waited for
print(json.dumps(got))
"""


@pytest.mark.parametrize("which", ["batch", "bench"])
def test_a_running_batch_or_bench_keeps_its_replaced_service(tmp_path, which):
    fifo, other = tmp_path / "fifo", tmp_path / "other"
    os.mkfifo(fifo)
    other.mkdir()
    script = SCRIPT.format(here=HERE)
    argv = [sys.executable, "-W", "always::ResourceWarning", "-c", script, str(fifo), str(other), which]
    argv.append(str(tmp_path / "out"))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got == {"codes": [0] if which == "batch" else [1], "retired": False, "collected": True}, got
    assert "ResourceWarning" not in done.stderr  # its Popen was waited for, not dropped running
