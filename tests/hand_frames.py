"""What a test's caller script runs to write frames on its runner service's socket by hand: the
library's connection, the mark its frames carry after their header (then each frame's request id
in clear: 8 zero bytes in a frame written by hand, an id the service never answers by), and its
last spec rebuilt as a value the script can change and send (``spec``)."""

import json
import subprocess
import sys

import pytest

LAST_SPEC = """connection = shared.connection()
mark = getattr(connection, "mark", b"")  # after each frame's header, as the library writes them
kind, values = connection.sent_spec[:2]
spec = kind.__new__(kind)
for name, value in zip(kind._fields, values):
    setattr(spec, name, value)
"""

# A run of the caller's in flight while frames are written by hand (its child blocked on a pipe the
# script holds), then the connection; ``RELEASED`` lets it end and prints what the script's calls
# (``calls``) and it gave, and whether one service carried them all.
HELD_RUN = """first = processkit.run(["true"]).runner_pid
read_end, write_end = os.pipe()
held = processkit.start(["sh", "-c", "read line; echo released"], stdin=read_end, stdout=subprocess.PIPE)
os.close(read_end)
connection = shared.connection()
"""

RELEASED = """os.write(write_end, b"go\\n")
os.close(write_end)
out, _ = held.communicate(timeout=60)
print(json.dumps({
    "calls": [[c.returncode, c.stdout.decode()] for c in calls],
    "held": [held.returncode, out.decode()],
    "same_service": len({first, held.runner_pid, *(c.runner_pid for c in calls)}) == 1,
}))
"""


def seen_after(script: str, arg: str, cwd, timeout: float) -> dict:
    """What a caller script of ``HELD_RUN`` and ``RELEASED`` printed, run with ``arg``, once it
    was seen that its run in flight went on and one service carried every call; a call still held
    at ``timeout`` fails the test."""
    try:
        done = subprocess.run([sys.executable, "-c", script, arg], capture_output=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        pytest.fail("the caller's calls were held")
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["held"] == [0, "released\n"], "the run in flight went on"
    assert seen["same_service"], "the service itself went on"
    return seen
