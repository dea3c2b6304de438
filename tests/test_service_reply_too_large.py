"""A reply the runner service cannot make fails its own call alone. A call's reply holds what it
captured, read back and pickled by the service: a capture larger than the service could pickle
(its memory, here its address-space limit; or past the frame's 4 GiB length) raised out of the
service's handling of the run's end, and the service answered nothing more: that call and every
later call of every thread of the process waited for ever (a ``timeout=`` too, the service
keeping that time). The call now keeps its child's outcome, its capture said as not returned. The limit is put on the service alone, once it runs (``prlimit``), above what
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
    "big": [big.returncode, big.stdout is None, big.diagnostics, big.runner_pid == service],
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
    code, nothing, said, same = seen["big"]
    assert (code, nothing, same) == (0, True, True), "the child's own code, its capture said as not returned"
    assert f"the run's stdout not returned ({CAPTURE} bytes): its reply could not be made (MemoryError)" in said, said
    assert "capture_max_bytes=" in said, said
    assert "CaptureWriteFailed" in done.stderr.decode(), done.stderr.decode()[-2000:]


# A process that limits its own address space and appends a frame of CAPTURE bytes to a buffer
# already holding a frame, at limits from where the pickle fails to where the frame fits: in
# between, the pickle is made and the buffer cannot grow by it (``buffer += payload``). Each
# attempt's failure must leave the buffer as it was: half a frame left in it, the next frame
# would be read from its wrong byte and every later reply lost (the service's hang).
APPENDER = r"""
import json, pickle, resource, sys
from processkit.api import wire
size, made = int(sys.argv[1]), []
real = pickle.dumps
pickle.dumps = lambda *args, **kwargs: made.append(real(*args, **kwargs)) or made[-1]
seen, whole = [], bytearray()
wire.append(whole, ("done", 0, {}), b"M")
for tenth in range(12, 24):
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    buffer, message, made[:] = bytearray(whole), ("done", 1, {"stdout": bytes(size)}), []
    with open("/proc/self/status") as handle:
        used = next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (used + size * tenth // 10, resource.RLIM_INFINITY))
    try:
        wire.append(buffer, message, b"M")
        seen.append("appended")
    except MemoryError:
        seen.append(["pickled" if made else "not pickled", buffer == whole])
    del message, buffer, made[:]
print(json.dumps(seen))
"""


def test_a_frame_that_cannot_be_queued_leaves_the_buffer_as_it_was(tmp_path):
    done = subprocess.run([PY, "-c", APPENDER, str(CAPTURE)], capture_output=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    assert ["pickled", True] in seen, f"no limit failed past the pickle: {seen}"
    assert all(attempt in ("appended", ["pickled", True], ["not pickled", True]) for attempt in seen), seen


def test_a_reply_that_cannot_be_made_even_without_its_bytes_is_a_setup_failure():
    """The last resort (no process can be made to fail twice on cue): 111, each cause by its full name."""
    import struct

    from processkit.service.unreplied import reply_anyway

    sent = []

    def reply(message):
        if len(sent) < 2:
            sent.append(message)
            raise struct.error("'I' format requires 0 <= number <= 4294967295") if not sent[1:] else MemoryError()
        sent.append(message)

    reply_anyway(reply, 7, {"code": 0, "stdout": b"x" * 10, "pid": 1})
    assert sent[1][2]["stdout"] is None and sent[1][2]["unkept"][0][:2] == ("stdout", 10), sent[1]
    code, (kind, message, _) = sent[2][2]["code"], sent[2][2]["failure"]
    assert (sent[2][1], code, kind) == (7, 111, "setup"), sent[2]
    assert (
        message.startswith("its report could not be made (struct.error: 'I' format") and "then MemoryError)" in message
    )
