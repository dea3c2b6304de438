"""Reading back a run's files (readback60). ``readback.reader`` calls a file unreadable only
where the file refuses this user (EACCES, EPERM: ``diagnostics`` then names it as no file this
user may read); a descriptor not to be had for another reason (a full descriptor table here)
says nothing of the file: ``NO_FILE``. A file the runner makes to read back is made to write
alone where reading is refused at its making. Each in a process of its own."""

from __future__ import annotations

import errno
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


REFUSING = r"""
import fcntl, os, sys
from processkit import safepath

real = os.open


def refusing(path, flags, *args, **kwargs):  # a mount (FUSE) whose files may be made to write, never to read
    if flags & os.O_CREAT and flags & os.O_ACCMODE == os.O_RDWR:
        raise OSError(int(sys.argv[2]), os.strerror(int(sys.argv[2])))
    return real(path, flags, *args, **kwargs)


os.open = refusing
fd = safepath.open_for_writing(sys.argv[1], readable=True)
os.write(fd, b"written")
print(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY)
"""


def test_a_file_refused_to_read_at_its_making_is_made_to_write_alone(tmp_path):
    """Where the read-write create is refused (``EACCES``, ``EOPNOTSUPP``), the file is still
    made, write-only, as it was before the read-back asked for reading: the run is not lost."""
    for code in (errno.EACCES, errno.EOPNOTSUPP):
        path = tmp_path / f"{code}.jsonl"
        done = subprocess.run(
            [sys.executable, "-c", REFUSING, str(path), str(code)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["True"]
        assert path.read_bytes() == b"written"
