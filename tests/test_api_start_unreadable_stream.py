"""``start(..., jsonl=PATH)`` follows the stream to see the run begin, in the caller: under a
umask that leaves the file it makes unreadable to its owner (``0o777``, ``0o477``), or at a file
of the caller's it may not read, the follower raised a bare ``PermissionError`` and left the run
going with no handle on it. It is refused before anything is sent, as a device is; ``run`` reads
its stream back another way (test_api_readback_umask.py) and is left as it is. In a process of
its own (the umask is the whole process's), without root's override of file modes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_api_readback_umask import _ran

from processkit.api.caller_env import reads_any_file

SCRIPT = r"""
import json, os, sys
import processkit

out = sys.argv[1]
processkit.run(["true"])  # the service starts under 022
label = {"unreadable-stream": str(os.getpid())}
own = os.path.join(out, "own.jsonl")
os.close(os.open(own, os.O_WRONLY | os.O_CREAT, 0o200))  # the caller's own, write-only
found = {}
for name, mask, path in (("777", 0o777, "a.jsonl"), ("477", 0o477, "b.jsonl"), ("377", 0o377, "d.jsonl"), ("own", 0o022, own)):
    path = os.path.join(out, path)
    made = os.path.exists(path)
    os.umask(mask)
    try:
        handle = processkit.start(["sleep", "3600"], jsonl=path, labels=label)
    except Exception as exc:
        found[name] = [type(exc).__name__, str(exc), os.path.exists(path) and not made]
    else:
        handle.kill()
        handle.wait()
        found[name] = "started"
    os.umask(0o022)
found["left"] = [run.run_id for run in processkit.runs(labels=label)]
os.umask(0o377)
found["run"] = processkit.run(["true"], jsonl=os.path.join(out, "c.jsonl")).returncode
print(json.dumps(found))
"""


def test_start_refuses_a_stream_its_caller_could_not_read_before_anything_runs(tmp_path):
    found = _ran(SCRIPT, tmp_path)
    for name, mask in (("777", "0o777"), ("477", "0o477")):
        assert found[name] == [
            "ValueError",
            f"jsonl={tmp_path}/{'a' if name == '777' else 'b'}.jsonl would be made under the umask {mask}, which "
            "leaves it unreadable to its owner: start() follows its jsonl= stream to see the run begin; give a "
            "umask that keeps the owner's read bit, or no jsonl= (the events are then handle.events())",
            False,
        ], "nothing made, nothing sent"
    assert found["own"] == [
        "ValueError",
        f"jsonl={tmp_path}/own.jsonl is a file this process may not read: start() follows its jsonl= stream "
        "to see the run begin; name a file it may read, or none (the events are then handle.events())",
        False,
    ]
    assert found["377"] == "started", "0o377 keeps the owner's read bit (0o400): followed as any file"
    assert found["left"] == [], "no run started"
    assert found["run"] == 0, "run() reads its stream back through the service's descriptor: as it was"


FULL_CAPS_SCRIPT = r"""
import json, os, sys
import processkit

processkit.run(["true"])  # the service starts under 022
os.umask(0o777)
handle = processkit.start(["sh", "-c", "exit 0"], jsonl=os.path.join(sys.argv[1], "root.jsonl"))
code = handle.wait(timeout=120)
os.umask(0o022)
print(json.dumps({"code": code}))
"""


@pytest.mark.skipif(not reads_any_file(), reason="needs root with its override of file modes")
def test_a_caller_that_reads_any_file_is_not_refused_under_a_umask_that_hides_its_stream(tmp_path):
    """Root with ``CAP_DAC_OVERRIDE`` reads its stream whatever its mode: the umask check is
    skipped for it (``caller_env.reads_any_file``), and ``start`` follows the stream to its end."""
    done = subprocess.run(
        [sys.executable, "-c", FULL_CAPS_SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"code": 0}
    assert (tmp_path / "root.jsonl").stat().st_mode & 0o777 == 0, "made under 0o777: no mode bit"
