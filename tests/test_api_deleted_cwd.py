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
