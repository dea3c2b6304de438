"""A named ``jsonl=`` stream is read back by the runner service at most as far as the run wrote
it: a child that grew the file at its path to a huge sparse one (a ``truncate``, in no time) made
the service read all of it into memory and pickle it into the reply (a big enough one would end
the service, and every run it carried). The service's peak memory tells; the events the call
returns are the run's own."""

from __future__ import annotations

import json
import subprocess
import sys

PY = sys.executable
SPARSE = 96 << 20  # far above any run's stream, and above the service's own peak

CALLER = r"""
import json, sys, processkit
stream, size = sys.argv[1], sys.argv[2]
def peak(pid):
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmHWM:"))
service = processkit.run(["true"]).runner_pid
before = peak(service)
grow = "import os, sys; os.truncate(sys.argv[1], int(sys.argv[2]))"
result = processkit.run([sys.executable, "-c", grow, stream, size], jsonl=stream)
names = [event.event for event in result.events]
print(json.dumps({"grown": peak(service) - before, "code": result.returncode, "first": names[:1]}))
"""


def test_a_jsonl_grown_by_its_child_is_read_back_only_as_far_as_the_run_wrote(tmp_path):
    stream = tmp_path / "run.jsonl"
    done = subprocess.run([PY, "-c", CALLER, str(stream), str(SPARSE)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    assert seen["code"] == 0 and seen["first"] == ["run_started"], seen
    assert seen["grown"] < SPARSE // 2, f"the service read {seen['grown']} bytes more than its peak"
