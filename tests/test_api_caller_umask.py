"""The caller's umask (threat59, attack b): the runner service is started once, at a process's
first call, and made every run's files (and a ``processkit.batch``'s or ``bench``'s process) (its capture directory and files, its stream) and its
child under the umask the caller had *then*. A caller that later tightened it (``os.umask(0o077)``)
to keep a run's output from other users got ``0644`` files and a child running under ``022``, where
``subprocess`` and ``processkit-cli`` give ``0600`` and ``077``. A request now carries the
caller's umask when it changed, and the service carries the run under it. Through the real
service, in a process of its own (the umask is the whole process's)."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r"""
import json, os, stat, sys
import processkit

out = sys.argv[1]
os.umask(0o022)
processkit.run(["true"])  # the service starts under 022
found = {}
for mask in (0o077, 0o022):
    os.umask(mask)
    where = os.path.join(out, oct(mask))
    done = processkit.run(
        ["sh", "-c", "umask; : > made"], cwd=out, capture_dir=os.path.join(where, "cap"), jsonl=where + ".jsonl"
    )
    modes = {
        name: oct(stat.S_IMODE(os.stat(path).st_mode))
        for name, path in (("dir", os.path.join(where, "cap")), ("stdout", os.path.join(where, "cap", "stdout.log")),
                           ("jsonl", where + ".jsonl"), ("made", os.path.join(out, "made")))
    }
    os.unlink(os.path.join(out, "made"))
    with open(os.path.join(where, "cap", "stdout.log")) as handle:
        modes["child"] = handle.read().strip()
    found[oct(mask)] = [done.returncode, modes]
os.umask(0o077)  # a batch and a benchmark: each in a process the service starts
batch = os.path.join(out, "batch")
processkit.batch([{"id": "j", "args": ["sh", "-c", "umask"]}], out=batch)
os.chdir(out)
processkit.bench([["sh", "-c", "umask > bench-umask"]], runs=1, warmup=0)
with open(os.path.join(batch, "j", "capture", "stdout.log")) as handle, open("bench-umask") as made:
    found["others"] = {
        "batch": handle.read().strip(),
        "summary": oct(stat.S_IMODE(os.stat(os.path.join(batch, "summary.jsonl")).st_mode)),
        "bench": made.read().strip(),
        "bench file": oct(stat.S_IMODE(os.stat("bench-umask").st_mode)),
    }
print(json.dumps(found))
"""


def test_each_run_is_made_under_the_callers_umask_of_the_call(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True
    )
    found = json.loads(done.stdout.splitlines()[-1])
    private = {"dir": "0o700", "stdout": "0o600", "jsonl": "0o600", "made": "0o600", "child": "0077"}
    assert found["0o77"] == [0, private]
    shared = {"dir": "0o755", "stdout": "0o644", "jsonl": "0o644", "made": "0o644", "child": "0022"}
    assert found["0o22"] == [0, shared], "a loosened umask travels as well"
    assert found["others"] == {"batch": "0077", "summary": "0o600", "bench": "0077", "bench file": "0o600"}
