"""``readback.reader`` calls a file unreadable only where the file refuses this user (EACCES,
EPERM: ``diagnostics`` then names it as no file this user may read); a descriptor not to be
had for another reason (a full descriptor table here) says nothing of the file: ``NO_FILE``.
In a process of its own, whose descriptor limit it lowers."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import fcntl, os, resource, sys  # fcntl loaded first: readback imports it lazily, which takes a descriptor
from processkit.readback import reader

fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)  # its owner's to read: the mode refuses nothing
resource.setrlimit(resource.RLIMIT_NOFILE, (fd + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
while True:  # every slot under the limit taken: the next descriptor fails EMFILE
    try:
        held.append(os.dup(0))
    except OSError:
        break
print(reader(fd))
"""


def test_a_full_descriptor_table_is_no_unreadable_file(tmp_path):
    for access in ("write-only", "read-write"):  # reopened through /proc, or a copy of the runner's own
        script = SCRIPT if access == "write-only" else SCRIPT.replace("os.O_WRONLY |", "os.O_RDWR |")
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / f"{access}.log")], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["-1"], f"{access}: NO_FILE, not UNREADABLE (-2)"
