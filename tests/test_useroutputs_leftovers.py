"""A writer killed while it fills an output (SIGKILL, an OOM kill, a file size limit) leaves
nothing: the file is filled unnamed (``O_TMPFILE``) and named ``.<name>.<pid>.<8 hex>.tmp`` only
just before the rename. Where a file system has no ``O_TMPFILE`` (or there is no ``/proc`` to
link by) the file is filled under that name, and a killed writer's is removed by the next write
to the same place (``useroutputs._sweep_left``, ``freshnames.sweep``): only this user's regular
files with no other link, stale by the file system's clock; another user's file, a hard link
(a way to make us unlink a name that shares an inode with a file we care about), one still
being filled and another output's leftover are left as they are.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from processkit import freshnames, useroutputs
from test_other_users import PRECIOUS, as_other, other_user, shared, victim  # noqa: F401  (fixtures)

LIMIT = 60


def plant(path: str, *, stale: bool = True) -> str:
    with open(path, "wb") as f:
        f.write(b"half of an old write")
    if stale:
        old = time.time() - 2 * freshnames.STALE_SECONDS
        os.utime(path, (old, old))
    return path


_KILLED_MID_WRITE = """
import resource, signal, sys
from processkit import useroutputs
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it: the kernel kills at the limit
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
useroutputs.write_output(sys.argv[1], b"x" * (1 << 20))
"""


def test_a_writer_killed_mid_write_leaves_nothing_beside_the_output(tmp_path):
    """Each killed writer left its half-written temporary file, and every later write listed
    the whole directory to find such files (a farm writing ``--usage-file`` per job in one
    directory paid for it quadratically)."""
    out = tmp_path / "usage.json"
    out.write_bytes(b"{}")
    writer = subprocess.run([sys.executable, "-c", _KILLED_MID_WRITE, out], capture_output=True, timeout=LIMIT)
    assert writer.returncode == -signal.SIGXFSZ, writer.stderr
    assert os.listdir(tmp_path) == ["usage.json"]
    assert out.read_bytes() == b"{}"


def test_without_o_tmpfile_the_next_write_removes_a_killed_writers_file_of_ones_own_only(
    other_user, shared, victim, monkeypatch, tmp_path
):
    monkeypatch.setattr(useroutputs, "_PROC_FDS", str(tmp_path / "no-proc"))  # the named path
    usage = os.path.join(shared, "usage.json")
    mine = plant(os.path.join(shared, ".usage.json.4242.deadbeef.tmp"))
    filling = plant(os.path.join(shared, ".usage.json.4243.00112233.tmp"), stale=False)
    elsewhere = plant(os.path.join(shared, ".other.json.4244.deadbeef.tmp"))
    linked = os.path.join(shared, ".usage.json.4245.0badf00d.tmp")
    os.link(victim, linked)
    os.utime(linked, (time.time() - 2 * freshnames.STALE_SECONDS,) * 2)
    theirs = os.path.join(shared, ".usage.json.4246.cafef00d.tmp")
    as_other(
        other_user, 'echo theirs > "$1"; touch -d "@$2" "$1"', theirs, int(time.time() - 2 * freshnames.STALE_SECONDS)
    )
    useroutputs.write_output(usage, b"{}")
    assert os.path.exists(usage)
    assert not os.path.exists(mine)
    assert all(map(os.path.exists, (filling, elsewhere, linked, theirs)))
    assert victim.read_bytes() == PRECIOUS and os.stat(victim).st_nlink == 2


def test_a_create_check_that_cannot_unlink_leaves_a_name_the_next_write_sweeps(monkeypatch, tmp_path):
    """Without ``O_TMPFILE`` the check that a file can be made makes a named one and unlinks it.
    An unlink that fails (or a checker killed before it) left ``.PID.HEX.tmp``, a name no sweep
    removes, and leaked the descriptor: the name is now the output's own temporary pattern,
    closed before the unlink, and the next write removes it once stale."""
    monkeypatch.setattr(useroutputs, "_unnamed", lambda dir_fd: -1)
    monkeypatch.setattr(useroutputs, "_PROC_FDS", str(tmp_path / "no-proc"))  # the named path
    out = tmp_path / "usage.json"
    unlink = os.unlink

    def refused(path, *, dir_fd=None):
        raise PermissionError(13, "refused")

    fds = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(os, "unlink", refused)
    try:
        useroutputs.check_output(str(out))
    except PermissionError:
        pass
    monkeypatch.setattr(os, "unlink", unlink)
    assert len(os.listdir("/proc/self/fd")) == fds, "the checker's descriptor leaked"
    [left] = os.listdir(tmp_path)
    assert left.startswith(".usage.json.") and left.endswith(".tmp"), left
    os.utime(tmp_path / left, (time.time() - 2 * freshnames.STALE_SECONDS,) * 2)
    useroutputs.write_output(str(out), b"{}")
    assert os.listdir(tmp_path) == ["usage.json"]
