"""A caller whose working directory was removed under it: the child starts in that directory
(as a ``subprocess`` child would, inheriting it), never in the runner service's own ``/``, so a
relative path the command or the run names is not taken from ``/`` (``rm -rf build`` from a
removed checkout). The check only reads: the child prints the inode of its ``.``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PY = sys.executable

CALLER = r"""
import json, os, sys, processkit
os.chdir(sys.argv[1])
os.rmdir(sys.argv[1])
result = processkit.run(["stat", "-L", "-c", "%i", "."], capture_output=True)
print(json.dumps([result.returncode, result.stdout.decode().strip()]))
"""


def test_a_removed_working_directory_is_the_childs_never_the_services_root(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    inode = os.stat(gone).st_ino
    done = subprocess.run([PY, "-c", CALLER, str(gone)], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    code, seen = json.loads(done.stdout)
    assert code == 0
    assert seen != str(os.stat("/").st_ino), "the child ran in the service's /"
    assert seen == str(inode), "the child runs in the caller's (removed) working directory"


STARTED = r"""
import os, sys, processkit
os.chdir(sys.argv[1])
os.rmdir(sys.argv[1])
result = processkit.run(["true"], jsonl=sys.argv[2])
sys.exit(result.returncode)
"""


def test_run_started_names_no_proc_stand_in_for_a_removed_directory(tmp_path):
    """The reference's ``cwd`` is "the child's absolute working directory; null if it could not
    be resolved" (events-v1.schema.json): a removed one is no directory, and the caller's
    ``/proc/<pid>/cwd`` that the service was handed names another process's entry, not the
    run's directory (it names whatever that pid is once the caller has gone)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    stream = tmp_path / "run.jsonl"
    done = subprocess.run([PY, "-c", STARTED, str(gone), str(stream)], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    started = [e for e in map(json.loads, stream.read_text().splitlines()) if e["event"] == "run_started"]
    assert len(started) == 1
    assert started[0]["cwd"] is None


def test_run_started_names_a_live_directory_by_its_path(tmp_path):
    """A caller in a live directory: its path, as before (the stand-in is never made for it)."""
    here = tmp_path / "here"
    here.mkdir()
    stream = tmp_path / "run.jsonl"
    code = "import sys, processkit; sys.exit(processkit.run(['true'], jsonl=sys.argv[1]).returncode)"
    done = subprocess.run([PY, "-c", code, str(stream)], cwd=here, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    started = [e for e in map(json.loads, stream.read_text().splitlines()) if e["event"] == "run_started"]
    assert started[0]["cwd"] == str(here)
