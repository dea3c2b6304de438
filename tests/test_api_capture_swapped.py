"""A capped capture is read back at its cap, whatever file is at its path by then: a child
that put a large sparse file in place of its ``capture_dir``'s ``stdout.log`` (a rename, in no
time) made the runner service read all of it into memory, and pickle it into the reply (the
caller then cut it to the bytes the run captured). The service's peak memory tells. (What the
reply holds is then the child's file, not what the runner captured, which went with the
replaced name: a capture kept under a name the child can change is only as true as the child.)"""

from __future__ import annotations

import json
import subprocess
import sys

PY = sys.executable
SPARSE = 96 << 20  # far above the cap, and above the service's own peak

PEAK = r"""
import json, sys, processkit
capture = sys.argv[1]
def peak(pid):
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmHWM:"))
service = processkit.run(["true"], capture_output=True).runner_pid
before = peak(service)
"""

CALLER = (
    PEAK
    + r"""
swap = (
    'printf captured; '
    'python3 -c "import os, sys; f = open(sys.argv[1], \'wb\'); f.truncate(int(sys.argv[2]))" "$1/new" "$2"; '
    'mv "$1/new" "$1/stdout.log"'
)
result = processkit.run(["sh", "-c", swap, "sh", capture, sys.argv[2]], capture_dir=capture,
                        capture_output=True, capture_max_bytes=1000)
print(json.dumps({"grown": peak(service) - before, "length": len(result.stdout), "code": result.returncode}))
"""
)


def test_a_capped_capture_swapped_for_a_huge_file_is_read_at_its_cap(tmp_path):
    capture = tmp_path / "cap"
    done = subprocess.run([PY, "-c", CALLER, str(capture), str(SPARSE)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    assert seen["code"] == 0 and seen["length"] == len("captured"), "cut to the bytes the run captured"
    assert seen["grown"] < SPARSE // 2, f"the service read {seen['grown']} bytes more than its peak"


RENAMED = r"""
import json, sys, processkit
capture = sys.argv[1]
swap = 'printf captured; printf SWAPPED-BY-THE-CHILD > "$1/new"; mv "$1/new" "$1/stdout.log"'
result = processkit.run(["sh", "-c", swap, "sh", capture], capture_dir=capture,
                        capture_output=True, capture_max_bytes=1000)
print(json.dumps({"stdout": result.stdout.decode(), "code": result.returncode}))
"""


def test_a_capture_is_read_back_from_the_runners_own_file_not_what_the_child_renamed_over_it(tmp_path):
    """The service reads a ``capture_dir`` capture back through a descriptor of the file the
    runner wrote (``RunContext.captured``), so the bytes returned are the ones captured; before,
    it read whatever was at ``stdout.log`` by then (here the child's own file, cut to 8 bytes)."""
    capture = tmp_path / "cap"
    done = subprocess.run([PY, "-c", RENAMED, str(capture)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    assert seen == {"stdout": "captured", "code": 0}
    assert (capture / "stdout.log").read_text() == "SWAPPED-BY-THE-CHILD", "the child's file stays at its name"


GROWN = (
    PEAK
    + r"""
grow = 'printf captured; python3 -c "import sys; open(sys.argv[1], \'r+b\').truncate(int(sys.argv[2]))" "$1/stdout.log" "$2"'
result = processkit.run(["sh", "-c", grow, "sh", capture, sys.argv[2]], capture_dir=capture, capture_output=True)
print(json.dumps({"grown": peak(service) - before, "stdout": result.stdout.decode(), "code": result.returncode}))
"""
)


def test_an_uncapped_capture_grown_in_place_is_read_only_as_far_as_the_run_wrote_it(tmp_path):
    """No cap set: the read-back went by the file's size, so a child that grew the runner's
    own capture file (the same file, a sparse end) made the service read all of it. It is now
    read only as far as the run wrote it (the engine's ``output_captured`` count)."""
    capture = tmp_path / "cap"
    done = subprocess.run([PY, "-c", GROWN, str(capture), str(SPARSE)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    assert seen["code"] == 0 and seen["stdout"] == "captured"
    assert seen["grown"] < SPARSE // 2, f"the service read {seen['grown']} bytes more than its peak"


SCRATCH = r"""
import json, resource, sys, processkit
processkit.run(["true"])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
# The child's own run's scratch capture directory (its parent is this caller's service, which
# this process started): a sparse file larger than the service hands inline is moved over its
# stdout.log once the child wrote its line there.
swap = '''
echo small
for dir in /dev/shm/processkit-api-$PPID-* /tmp/processkit-api-$PPID-*; do [ -d "$dir" ] && scratch=$dir; done
capture=$(ls -td "$scratch"/r*/ | head -1)
python3 -c "import sys; open(sys.argv[1], 'wb').truncate(int(sys.argv[2]))" "$capture/big" "$1"
mv "$capture/big" "$capture/stdout.log"
'''
result = processkit.run(["sh", "-c", swap, "sh", sys.argv[2]], capture_output=True, jsonl=sys.argv[1])
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
print(json.dumps({"grown": grown, "stdout": result.stdout.decode(), "code": result.returncode}))
"""


def test_a_scratch_capture_swapped_for_a_huge_file_returns_what_the_run_captured(tmp_path):
    """A call's scratch capture (a named ``jsonl=``, so a directory, not memfds) was handed to
    the caller by its path once the file there was large, and the caller read it whole: a child
    that moved a sparse file over it made the caller read all of it, and got its first bytes
    (zeros) as its stdout. The service now judges the runner's own file, and hands a path only
    while it is still that file, with the count the run wrote."""
    done = subprocess.run([PY, "-c", SCRATCH, str(tmp_path / "s.jsonl"), str(SPARSE)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    assert seen["code"] == 0 and seen["stdout"] == "small\n", "the bytes the run captured"
    assert seen["grown"] < SPARSE // 2, f"the caller read {seen['grown']} bytes more than its peak"
