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


def test_a_large_input_reaches_the_child_whole_without_copies_in_the_caller_or_the_service(tmp_path):
    done = subprocess.run([sys.executable, "-c", CALLER, str(SIZE)], capture_output=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    digest = hashlib.sha256(bytes(range(256)) * (SIZE // 256)).hexdigest()
    assert seen["code"] == 0 and seen["stdout"].split() == ["True", digest, "-"], seen  # a pipe, every byte
    assert seen["service_grown"] < SIZE // 2, f"the service's peak grew by {seen['service_grown']} bytes"
    assert seen["caller_grown"] < SIZE // 2, f"the caller's peak grew by {seen['caller_grown']} bytes"


LIMITED = r"""
import hashlib, resource, signal, sys, processkit
processkit.run(["true"])  # the service, started under no file size limit
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # as an embedding program may: a write past the limit kills
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))
data = bytes(range(256)) * (int(sys.argv[1]) // 256)
result = processkit.run(["sha256sum"], input=data, capture_output=True)
print(result.returncode, result.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest())
"""


def test_a_large_input_the_caller_cannot_hold_in_a_file_of_its_own_still_reaches_the_child(tmp_path):
    """The caller's ``ulimit -f`` below the input: its memfd cannot hold it, so it travels in the
    frame as before, and the service, under its own limit, feeds it whole. The limit is read,
    never met: a write past it raised SIGXFSZ, and a caller that had not ignored that signal
    (Python ignores it; an embedding program or a library may not) was killed by it."""
    done = subprocess.run([sys.executable, "-c", LIMITED, str(2 << 20)], capture_output=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.split() == [b"0", b"True"]


NO_MEMFD = r"""
import errno, hashlib, os, subprocess, sys, processkit
def unavailable(*args):  # a seccomp filter's answer (a container's, a sandbox's)
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
os.memfd_create = unavailable
processkit.run(["true"])  # the service, whose own memfds are its own
before = sorted(os.listdir("/proc/self/fd"))
data = bytes(range(256)) * (int(sys.argv[1]) // 256)
result = processkit.run(["sha256sum"], input=data, capture_output=True)
child = processkit.start(["sha256sum"], input=data, stdout=subprocess.PIPE)
out = child.communicate()[0]
digest = hashlib.sha256(data).hexdigest()
print(result.returncode, result.stdout.split()[0].decode() == digest, out.split()[0].decode() == digest)
del child  # its pidfd, kept by the handle
print(sorted(os.listdir("/proc/self/fd")) == before)
"""


def test_a_large_input_where_the_caller_has_no_memfd_travels_in_the_frame(tmp_path):
    """A caller that cannot make a memfd (ENOSYS or EPERM under a seccomp filter, EMFILE) sends
    the input in the frame, as before: the OSError escaped ``run`` and ``start``, and ``start``
    left its pipes open."""
    done = subprocess.run(
        [sys.executable, "-c", NO_MEMFD, str(2 << 20)], capture_output=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.split() == [b"0", b"True", b"True", b"True"]


# A service from before the memfd: it does not know ``input_fd`` (the key is dropped here, as it
# ignored it), so it takes no descriptor for the input and closes the one that came.
OLDER_SERVICE = (
    "from processkit.service import request\n"
    "taken = request.Request.take_given\n"
    "def unknowing(self, extra, brought):\n"
    "    taken(self, {key: value for key, value in extra.items() if key != 'input_fd'}, brought)\n"
    "request.Request.take_given = unknowing\n"
    "from processkit.service.serve import main; main()\n"
)
AGAINST_OLDER = r"""
import sys, processkit
from processkit.api import service
service.service_command = lambda fd, caller: [sys.executable, "-c", sys.argv[2], str(fd), str(caller)]
result = processkit.run(["wc", "-c"], input=b"x" * int(sys.argv[1]), capture_output=True)
print(result.returncode, result.stdout)
print(result.message)
"""


def test_a_service_that_cannot_take_the_input_memfd_refuses_the_run_never_feeds_it_empty(tmp_path):
    """A caller newer than its service (a checkout beside an older install) sent the input as a
    descriptor the service did not take, and ``input: None`` in its place: the child read an
    empty stdin and the call exited 0. The stand-in the caller names now is a path that service
    cannot open: a setup failure (111) naming it."""
    size = (2 << 20) + 1
    done = subprocess.run(
        [sys.executable, "-c", AGAINST_OLDER, str(size), OLDER_SERVICE], capture_output=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    code, message = done.stdout.decode().split("\n", 1)
    assert code == "111 b''", done.stdout  # no child ran: its capture empty, as subprocess's
    assert "could not open stdin file" in message and "an older service cannot take" in message, message


MAPPED = r"""
import hashlib, json, mmap, resource, subprocess, sys, processkit
size = int(sys.argv[1])
processkit.run(["true"])
mapped = mmap.mmap(-1, size)
for _ in range(size >> 16):  # in pieces: a whole one would raise the peak as a copy does
    mapped.write(bytes(range(256)) * 256)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
result = processkit.run(["sha256sum"], input=mapped, capture_output=True)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
child = processkit.start(["sha256sum"], input=mapped, stdout=subprocess.PIPE)
mapped.close()  # the call holds no view of it once started: a held one raised BufferError
digest = hashlib.sha256(bytes(range(256)) * (size // 256)).hexdigest()
print(json.dumps([result.returncode, result.stdout.split()[0].decode() == digest,
                  child.communicate()[0].split()[0].decode() == digest, grown]))
"""


def test_a_large_mapped_input_is_written_from_in_place_and_let_go_of(tmp_path):
    """An ``mmap`` (any contiguous bytes-like object) over ``INLINE_INPUT`` was copied whole in the
    caller before its memfd was written: a 64 MiB one raised the caller's peak by 64 MiB more than
    subprocess's. It is written from in place, and the object can be closed once ``start`` returned."""
    done = subprocess.run([sys.executable, "-c", MAPPED, str(SIZE)], capture_output=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    code, whole, whole_started, grown = json.loads(done.stdout)
    assert (code, whole, whole_started) == (0, True, True)
    assert grown < SIZE // 4, f"the caller's peak grew by {grown} bytes"
