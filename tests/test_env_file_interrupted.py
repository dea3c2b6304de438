"""An ``--env-file`` FIFO whose wait for a writer is broken into leaks no descriptor (mend59f).
A run carried alone waits on the FIFO judged for a writer (once by a second open through
``/proc/self/fd/N``, now a ``poll`` of its descriptor); a KeyboardInterrupt during that wait
left the first descriptor open. Here the
interrupt is a SIGALRM handler's, raised while the open waits (no writer ever comes), in a
process of its own."""

from __future__ import annotations

import json
import subprocess
import sys

INTERRUPTED = r"""
import json, os, signal, sys
from processkit.engine.environment import _read_env_file

fifo = sys.argv[1]
os.mkfifo(fifo)
def interrupt(signum, frame):
    raise KeyboardInterrupt
signal.signal(signal.SIGALRM, interrupt)
before = sorted(os.listdir("/proc/self/fd"))
signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)  # again until it lands in the wait
try:
    _read_env_file(fifo, alone=True)
except KeyboardInterrupt:
    pass
signal.setitimer(signal.ITIMER_REAL, 0)
print(json.dumps([before, sorted(os.listdir("/proc/self/fd"))]))
"""


def test_an_env_file_fifo_wait_broken_into_leaks_no_descriptor(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED, str(tmp_path / "env")], capture_output=True, text=True, timeout=120
    )
    before, after = json.loads(done.stdout.splitlines()[-1])
    assert after == before, done.stderr[-2000:]
