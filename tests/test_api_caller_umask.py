"""The caller's umask (threat59, attack b): the runner service is started once, at a process's
first call, and made every run's files (its capture directory and files, its stream) and its
child, and the process of a ``processkit.batch`` or ``bench``, under the umask the caller had
*then*. A caller that later tightened it (``os.umask(0o077)``) to keep a run's output from other
users got ``0644`` files and a child running under ``022``, where ``subprocess`` and
``processkit-cli`` give ``0600`` and ``077``. A request now carries the caller's umask when it
changed, and the service carries the run under it. Through the real service, in a process of
its own (the umask is the whole process's)."""

from __future__ import annotations

import json
import os
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


OWN_FILES = r"""
import json, os, sys, warnings
import processkit

os.umask(0o022)
processkit.run(["true"])  # the service starts under 022
found = {}
for mask in (0o277, 0o700):
    os.umask(mask)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", processkit.CaptureTruncated)
        done = processkit.run(
            ["sh", "-c", "echo 0123456789abcdefghijklmnopqrstuvwxyz"],
            capture_output=True, capture_keep="tail", capture_max_bytes=20,
        )
    with processkit.start(["true"]) as handle:  # its stream followed live: a file of the service's
        followed = handle.wait()
    found[oct(mask)] = [done.returncode, done.stdout.decode(), followed]
print(json.dumps(found))
"""


def test_the_services_own_files_take_no_umask():
    """A umask with no owner's bits (``0o277``, ``0o700``) is the caller's and its child's: the
    capture directory the service makes in its scratch (no ``capture_dir=``) is the service's
    own, made with its own modes (it refused the service its files: 111 naming a directory the
    user never gave), as is the stream of a run ``start`` follows live (PermissionError). Root is run without its override of file modes, as any other user is."""
    unprivileged = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    done = subprocess.run(
        [*unprivileged, sys.executable, "-c", OWN_FILES], capture_output=True, text=True, timeout=120, check=True
    )
    found = json.loads(done.stdout.splitlines()[-1])
    assert found == {"0o277": [0, "hijklmnopqrstuvwxyz\n", 0], "0o700": [0, "hijklmnopqrstuvwxyz\n", 0]}


def test_a_run_with_no_umask_to_carry_is_its_own_steps():
    """A request with no umask, or its service's own (a caller that never changed it), is
    driven as the run's steps themselves: no wrapper resumed at each step."""
    from processkit.service import caller_umask

    steps = iter(())
    assert caller_umask.carried(steps, None) is steps
    assert caller_umask.carried(steps, caller_umask._own()) is steps
    assert caller_umask.carried(steps, caller_umask._own() ^ 0o007) is not steps
