"""A capture larger than the reply carries inline is handed to the caller as a file of the
service's scratch directory (in memory, on a tmpfs), which the caller reads once and removes. An
interruption (Ctrl-C, a SIGTERM handler that raises) after the reply came but before those files
were read left them there until the process ended: each such Ctrl-C kept a whole capture in
memory. They are now removed as the interruption goes on."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import SAFETY_NET

PY = sys.executable

# The signal is sent as the result is being built from the reply, before its captures are read.
CALLER = r"""
import json, os, signal, threading, processkit
from processkit.api import result, shared

class Interrupted(Exception):
    pass

main = threading.get_ident()
signal.signal(signal.SIGUSR1, lambda number, frame: (_ for _ in ()).throw(Interrupted()))
plain = result.captures
armed = [True]

def captures(*args):
    if armed[0]:
        armed[0] = False
        signal.pthread_kill(main, signal.SIGUSR1)  # the handler raises as soon as the main thread runs
    return plain(*args)

result.captures = captures
seen = {}
try:
    processkit.run(["head", "-c", "3000000", "/dev/zero"], capture_output=True)
except Interrupted:
    seen["interrupted"] = True
scratch = shared.connection().scratch
seen["left"] = sorted(os.listdir(scratch))
seen["after"] = len(processkit.run(["head", "-c", "3000000", "/dev/zero"], capture_output=True).stdout)
print(json.dumps(seen), flush=True)
"""


def test_an_interruption_before_a_large_capture_is_read_leaves_no_file_behind():
    try:
        done = subprocess.run([PY, "-c", CALLER], capture_output=True, timeout=SAFETY_NET)
    except subprocess.TimeoutExpired:
        raise AssertionError("a call hung") from None
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen == {"interrupted": True, "left": [], "after": 3000000}
