"""A ``processkit.start`` with pipes whose request could not be sent closes the caller's ends of
the pipes it made (``Stdio.unsent``): a close that failed (EIO, EINTR: the descriptor is gone all
the same on Linux) left the ends after it open for the process's life."""

from __future__ import annotations

from test_api_suspended_reader import _seen

# The send fails (the service gone), and the first close after it fails; the fds left open are counted.
CALLER = r"""
import errno, json, os, subprocess, processkit
from processkit.api import shared

plain_close = os.close
armed = [False]

def close(fd):
    plain_close(fd)
    if armed[0]:
        armed[0] = False
        raise OSError(errno.EIO, "Input/output error")

def send(*args, **kwargs):
    armed[0] = True
    raise OSError(errno.EPIPE, "Broken pipe")

processkit.run(["true"])  # the service and its descriptors are there before the count
before = len(os.listdir("/proc/self/fd"))
os.close, shared.send = close, send
try:
    processkit.start(["true"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
except OSError as exc:
    raised = exc.errno
os.close = plain_close
print(json.dumps({"raised": raised, "more": len(os.listdir("/proc/self/fd")) - before}))
"""


def test_a_failed_close_of_an_unsent_starts_pipe_leaves_no_other_open():
    seen = _seen(CALLER)
    assert seen["more"] == 0, "every end made is closed"
    assert seen["raised"] == 32, "the send's own failure is raised, not the close's"
