"""A ``processkit.start`` with pipes that fails for want of descriptors (the caller at its open
file limit) closes the caller's ends of the pipes it made before the failure: they were left open
for the process's life, so each such failure took more of the descriptors it lacked. And its
error is Popen's, no file named: it named one of the library's own (``'dev'``, the first
directory of the path to the service's scratch stream, or ``'/proc/self/fd/254'``)."""

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
seen, named = {}, []
for free in range(1, 8):
    for pipes in (True, False):
        for fd in [held.pop() for _ in range(free)]:
            os.close(fd)
        streams = dict.fromkeys(("stdin", "stdout", "stderr"), subprocess.PIPE) if pipes else {}
        try:
            processkit.start(["true"], **streams).wait()
            said = "started"
        except OSError as exc:
            said = exc.errno
            if exc.filename is not None:
                named.append(exc.filename)
        again = fill()
        if pipes:
            seen[free] = [said, len(again)]
        held += again
print(json.dumps({"seen": seen, "named": named}))
"""


def test_a_start_that_fails_at_the_fd_limit_leaves_no_pipe_end_open_and_names_no_file():
    done = subprocess.run([sys.executable, "-c", CALLER], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    seen, named = json.loads(done.stdout).values()
    assert named == [], "an EMFILE that names no file, as Popen's"
    assert any(said == 24 for said, _ in seen.values()), seen  # some start failed for want of descriptors
    assert {free: reopened for free, (_, reopened) in seen.items()} == {str(n): n for n in range(1, 8)}, seen
