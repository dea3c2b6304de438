"""A reply the runner service cannot make fails its own call alone. A call's reply holds what it
captured, read back and pickled by the service: a capture larger than the service could pickle
(its memory, here its address-space limit; or past the frame's 4 GiB length) raised out of the
service's handling of the run's end, and the service answered nothing more: that call and every
later call of every thread of the process waited for ever (a ``timeout=`` too, the service
keeping that time). The limit is put on the service alone, once it runs (``prlimit``), above what
it uses then by less than twice the capture."""

from __future__ import annotations

import json
import subprocess
import sys

PY = sys.executable
CAPTURE = 64 << 20  # bytes the child writes: read back whole, then pickled into the reply

CALLER = r"""
import json, resource, sys, processkit
capture, size = sys.argv[1], int(sys.argv[2])
service = processkit.run(["true"]).runner_pid
with open(f"/proc/{service}/status") as handle:
    used = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmSize:"))
resource.prlimit(service, resource.RLIMIT_AS, (used + size * 3 // 2, resource.RLIM_INFINITY))
big = processkit.run(["head", "-c", str(size), "/dev/zero"], capture_output=True, capture_dir=capture)
after = processkit.run(["echo", "after"], capture_output=True)
print(json.dumps({
    "big": [big.returncode, big.stdout is None, big.diagnostics],
    "after": [after.returncode, after.stdout.decode(), after.runner_pid == service],
}))
"""


def test_a_reply_the_service_cannot_make_fails_its_call_alone(tmp_path):
    done = subprocess.run(
        [PY, "-c", CALLER, str(tmp_path / "cap"), str(CAPTURE)], capture_output=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    assert seen["after"] == [0, "after\n", True], "the next call is served by the same service"
    code, nothing, said = seen["big"]
    assert (code, nothing) == (104, True), seen
    assert "its reply could not be made (MemoryError)" in said and "capture_max_bytes=" in said, said
