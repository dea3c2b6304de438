"""A ``processkit.start`` with pipes that fails for want of descriptors (the caller at its open
file limit) closes the caller's ends of the pipes it made before the failure: they were left open
for the process's life, so each such failure took more of the descriptors it lacked."""

from __future__ import annotations

import json
import subprocess
import sys

# The caller filled to its limit, then given 1 to 7 descriptors back, each time a start() with
# three pipes: what it raised, and how many descriptors it can open again after it.
CALLER = r"""
import json, os, resource, subprocess, processkit

processkit.run(["true"])  # the service started while descriptors are to be had
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

def fill():
    held = []
    try:
        while True:
            held.append(os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC))
    except OSError:
        return held

held = fill()
seen = {}
for free in range(1, 8):
    for fd in [held.pop() for _ in range(free)]:
        os.close(fd)
    try:
        processkit.start(["true"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE).wait()
        said = "started"
    except OSError as exc:
        said = exc.errno
    again = fill()
    seen[free] = [said, len(again)]
    held += again
print(json.dumps(seen))
"""


def test_a_start_that_fails_at_the_fd_limit_leaves_no_pipe_end_open():
    done = subprocess.run([sys.executable, "-c", CALLER], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert any(said == 24 for said, _ in seen.values()), seen  # some start failed for want of descriptors
    assert {free: reopened for free, (_, reopened) in seen.items()} == {str(n): n for n in range(1, 8)}, seen
