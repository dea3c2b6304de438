"""A named ``jsonl=`` stream is read back by the runner service at most as far as the run wrote
it: a child that grew the file at its path to a huge sparse one (a ``truncate``, in no time) made
the service read all of it into memory and pickle it into the reply (a big enough one would end
the service, and every run it carried). The service's peak memory tells; the events the call
returns are the run's own."""

from __future__ import annotations

import json
import os
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


FOREIGN = r"""
import json, os, sys, processkit
directory = sys.argv[1]
stream = os.path.join(directory, "s.jsonl")
first = processkit.run(["true"], jsonl=stream)
if os.geteuid() == 0:  # another user's file in another user's directory: the runner writes no stream there
    os.chown(stream, 65534, 65534)
    os.chown(directory, 65534, 65534)
else:  # a file and a directory this user may not write
    os.chmod(stream, 0o400)
    os.chmod(directory, 0o500)
second = processkit.run(["true"], jsonl=stream)
ids = sorted({event.run_id for event in second.events if getattr(event, "run_id", None)})
print(json.dumps({"code": second.returncode, "ids": ids, "first": first.run_id}))
"""


def test_a_call_whose_stream_was_never_opened_returns_none_of_an_earlier_runs_events(tmp_path):
    """A run that could not open its ``jsonl=`` wrote nothing there: the service read back the
    earlier run's stream at that path as this call's events."""
    directory = tmp_path / "d"
    directory.mkdir()
    try:
        done = subprocess.run([PY, "-c", FOREIGN, str(directory)], capture_output=True, timeout=120)
    finally:
        for path, mode in ((directory, 0o700), (directory / "s.jsonl", 0o600)):
            os.chmod(path, mode)
            os.chown(path, os.geteuid(), os.getegid())
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    assert seen["code"] != 0 and seen["first"] not in seen["ids"], seen


SWAPPED = r"""
import json, os, sys, processkit
directory = sys.argv[1]
stream, other = os.path.join(directory, "s.jsonl"), os.path.join(directory, "other.jsonl")
first = processkit.run(["true"], jsonl=other)
swap = "import os, sys; os.rename(sys.argv[1], sys.argv[1] + '.moved'); os.symlink(sys.argv[2], sys.argv[1])"
second = processkit.run([sys.executable, "-c", swap, stream, other], jsonl=stream)
ids = sorted({event.run_id for event in second.events if getattr(event, "run_id", None)})
print(json.dumps({"code": second.returncode, "ids": ids, "first": first.run_id}))
"""


def test_a_stream_whose_path_was_taken_since_returns_none_of_that_files_events(tmp_path):
    """The service read a named stream back by its path once the run was over: whatever file or
    link was put there since was returned as the run's events (a link to another run's stream,
    here made by the child, as another user who can write the stream's directory could)."""
    directory = tmp_path / "d"
    directory.mkdir()
    done = subprocess.run([PY, "-c", SWAPPED, str(directory)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    assert seen["code"] == 0 and seen["first"] not in seen["ids"], seen
