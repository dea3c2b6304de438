"""A ``processkit.start`` with pipes that failed once its request was sent (the run's stream could
not be followed: EMFILE; or its program could not be used: FileNotFoundError, as Popen's) left the
handle's pipe files open for as long as the exception lived (its traceback holds ``start``'s
frame, and so the handle and its stdin, stdout, stderr): three descriptors for each failure kept."""

from __future__ import annotations

import pytest
from test_api_suspended_reader import _seen

# Five failing starts with three pipes each, their exceptions kept: how many more descriptors are open.
CALLER = r"""
import errno, json, os, subprocess, sys, processkit
from processkit.api.handle import RunHandle

def events(self):
    raise OSError(errno.EMFILE, "Too many open files")
    yield

how = sys.argv[1]
args = ["true"] if how == "stream" else ["/nonexistent/program"]
if how == "stream":
    RunHandle.events = events
processkit.run(["true"])  # the service and its descriptors are there before the count
before = len(os.listdir("/proc/self/fd"))
kept = []
for _ in range(5):
    try:
        processkit.start(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        kept.append(exc)
print(json.dumps({"raised": [exc.errno for exc in kept], "more": len(os.listdir("/proc/self/fd")) - before}))
"""


@pytest.mark.parametrize("how", ["stream", "program"])
def test_a_failed_start_closes_its_pipe_files_while_its_exception_is_kept(how):
    seen = _seen(CALLER, how)
    assert seen["raised"] == [24 if how == "stream" else 2] * 5
    assert seen["more"] == 0, "no pipe file of a failed start is left open"
