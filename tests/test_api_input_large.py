"""A large ``input=`` travels to the runner service as a memfd of the caller's, beside the
request, not inside its pickle: pickled, it was copied twice in the caller (the pickle, then
the frame) and twice in the service (the read, then the unpickled bytes), so 200 MiB of input
raised the caller's peak by ~600 MiB and the service's by ~400 MiB (subprocess.run's: the
input alone), and an input of 4 GiB or more did not fit the frame's length (``struct.error``).
Both peaks tell; the child still reads every byte through a pipe, as before."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

SIZE = 64 << 20

CALLER = r"""
import hashlib, json, os, resource, stat, sys, processkit
def peak(pid):
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmHWM:"))
service = processkit.run(["true"]).runner_pid
data = bytes(range(256)) * (int(sys.argv[1]) // 256)
before_service = peak(service)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
probe = 'python3 -c "import os, stat, sys; print(stat.S_ISFIFO(os.fstat(0).st_mode))"; sha256sum'
result = processkit.run(["sh", "-c", probe], input=data, capture_output=True)
print(json.dumps({
    "code": result.returncode,
    "stdout": result.stdout.decode(),
    "service_grown": peak(service) - before_service,
    "caller_grown": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before,
}))
"""


def test_a_large_input_reaches_the_child_whole_without_copies_in_the_caller_or_the_service():
    done = subprocess.run([sys.executable, "-c", CALLER, str(SIZE)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    digest = hashlib.sha256(bytes(range(256)) * (SIZE // 256)).hexdigest()
    assert seen["code"] == 0 and seen["stdout"].split() == ["True", digest, "-"], seen  # a pipe, every byte
    assert seen["service_grown"] < SIZE // 2, f"the service's peak grew by {seen['service_grown']} bytes"
    assert seen["caller_grown"] < SIZE // 2, f"the caller's peak grew by {seen['caller_grown']} bytes"


LIMITED = r"""
import hashlib, resource, sys, processkit
processkit.run(["true"])  # the service, started under no file size limit
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))
data = bytes(range(256)) * (int(sys.argv[1]) // 256)
result = processkit.run(["sha256sum"], input=data, capture_output=True)
print(result.returncode, result.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest())
"""


def test_a_large_input_the_caller_cannot_hold_in_a_file_of_its_own_still_reaches_the_child():
    """The caller's ``ulimit -f`` below the input: its memfd cannot hold it (EFBIG), so it travels
    in the frame as before, and the service, under its own limit, feeds it whole."""
    done = subprocess.run([sys.executable, "-c", LIMITED, str(2 << 20)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.split() == [b"0", b"True"]
