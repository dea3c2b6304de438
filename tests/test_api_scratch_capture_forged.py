"""A capture over 1 MiB comes back from the runner service as a file in its scratch directory,
read by the caller by its path once the reply came. That file is the user's: any process of the
user's (the child of another call in flight, or of another thread's) can write into it first,
and the call returned those bytes as its child's output, with return code 0 and no word. The
caller now checks what it read against the SHA-256 the run recorded for the capture: bytes that
are not the ones captured are never returned (None, said: ``CaptureWriteFailed``), whichever way
they come: read by the path, or inline in the reply (a small capture, or one cut to 1 MiB). The
digest is the service's own record, sent in the reply: not ``jsonl=``'s file, which the user's
processes can rewrite as well."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PY = sys.executable
SIZE = 2 << 20  # over ``held_capture.INLINE_MOST``: handed over as a file in the scratch

# The caller: its victim call's child writes SIZE bytes, says so, and waits; meanwhile a thread
# of the caller (any process of the user's would do) writes into that call's capture file in the
# scratch, then lets the child end. ``plain``: nobody writes (the capture comes back whole);
# ``truncate``: the file is also cut to 1 MiB, so the service sends what is left inline.
CALLER = r"""
import glob, json, os, sys, threading, warnings
import processkit
from processkit.rundir import base, batch_base

here, size, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
service = processkit.run(["true"]).runner_pid
child = 'head -c "$2" /dev/zero | tr "\\0" a; : > "$1/ready"; while [ ! -e "$1/go" ]; do sleep 0.01; done'

def attacker():
    while not os.path.exists(os.path.join(here, "ready")):
        threading.Event().wait(0.01)
    if mode != "plain":
        pattern = os.path.join("{}", f"processkit-api-{service}-*", "r*", "stdout.log")
        found = [path for where in {base(), batch_base()} for path in glob.glob(pattern.format(where))]
        for path in found:
            while os.stat(path).st_size < size:  # the runner may still be draining the child's pipe
                threading.Event().wait(0.01)
            fd = os.open(path, os.O_WRONLY)
            os.pwrite(fd, b"FORGED!!", 0)
            if mode == "truncate":  # what is left comes inline in the reply, not read by its path
                os.ftruncate(fd, 1 << 20)
            os.close(fd)
        print(json.dumps({"forged": len(found)}), flush=True)
    open(os.path.join(here, "go"), "w").close()

thread = threading.Thread(target=attacker)
thread.start()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    result = processkit.run(["sh", "-c", child, "sh", here, str(size)], capture_output=True,
                            jsonl=os.path.join(here, "run.jsonl"))
thread.join()
stdout = result.stdout
print(json.dumps({
    "code": result.returncode,
    "stdout": None if stdout is None else {"length": len(stdout), "head": stdout[:8].decode()},
    "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
}))
"""


def _call(tmp_path, mode: str, size: int = SIZE) -> tuple[list, dict]:
    done = subprocess.run(
        [PY, "-c", CALLER, str(tmp_path), str(size), mode], capture_output=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return lines[:-1], lines[-1]


@pytest.mark.parametrize(
    ("mode", "size"),
    [
        ("forge", SIZE),  # read by its path
        ("truncate", SIZE),  # cut to 1 MiB: sent inline, and the rest lost
        ("forge", 100_000),  # small: sent inline
    ],
    ids=["by-path", "shrunk-inline", "small-inline"],
)
def test_a_capture_written_into_by_another_process_is_not_returned_as_the_childs(tmp_path, mode, size):
    said, seen = _call(tmp_path, mode, size)
    assert said == [{"forged": 1}], "the attacker found the call's capture file in the scratch"
    assert seen["code"] == 0
    assert seen["stdout"] is None, f"bytes the child never wrote came back as its output: {seen['stdout']}"
    assert any(w.startswith("CaptureWriteFailed:") and "changed before it was read" in w for w in seen["warnings"]), (
        seen["warnings"]
    )


@pytest.mark.parametrize("size", [SIZE, 100_000], ids=["by-path", "inline"])
def test_a_capture_nobody_wrote_into_comes_back_whole_and_unsaid(tmp_path, size):
    said, seen = _call(tmp_path, "plain", size)
    assert said == []
    assert seen == {"code": 0, "stdout": {"length": size, "head": "a" * 8}, "warnings": []}
