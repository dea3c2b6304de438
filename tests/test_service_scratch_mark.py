"""The mark of this user's scratch directories in a later base (``/tmp``, when ``/dev/shm`` is
full: ``scratch._marked``) is held shared while a directory is made there, and a service in the
first base sweeps the later one only while it holds the mark itself (``_sweep_marked``). What
is at the mark's name is used only when it is this user's regular file with no other name, and
its lock is never waited for (review of mend56a): where ``fs.protected_hardlinks`` is off,
another user could link there a file of the user's that some program holds locked, and fill
/dev/shm; the service's next start then waited on that lock forever, and every API call with
it. Everything here is under the test's own directories."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from processkit.service import scratch
from test_other_users import other_user  # noqa: F401 - the fixture: a second OS user
from test_service_scratch_sweep import _dead_pid
from conftest import SAFETY_NET

MARKED = r"""
import sys
from processkit.service import scratch
path, lock = scratch._marked(sys.argv[1])
print(path, flush=True)
scratch.remove(path, lock)
"""


def _base(tmp_path):
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    return base, base / f".processkit-api-elsewhere-{os.geteuid()}"


def _locked(path) -> int:
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _made_while_locked(base, locked) -> None:
    """``_marked(base)`` makes its directory in ``base`` while this process holds ``locked``
    exclusively; in a process of its own, so that one that waits fails the test, not hangs it:
    the generous timeout is only that bound, the fixed service returns within ~0.2 s."""
    held = _locked(locked)
    try:
        done = subprocess.run([sys.executable, "-c", MARKED, str(base)], capture_output=True, timeout=SAFETY_NET)
    finally:
        os.close(held)
    assert done.returncode == 0, done.stderr.decode()
    assert os.path.dirname(done.stdout.decode().strip()) == str(base)


def test_a_mark_linked_to_a_locked_file_of_the_users_does_not_hold_the_start(tmp_path):
    """The reviewer's reproduction: ``ln victim.lock base/<mark>; flock -x victim.lock``."""
    victim = tmp_path / "victim.lock"
    victim.write_text("data\n")
    base, mark = _base(tmp_path)
    os.link(victim, mark)
    _made_while_locked(base, victim)
    assert victim.read_text() == "data\n"


def test_a_mark_a_sweep_holds_is_gone_without_not_waited_for(tmp_path):
    base, mark = _base(tmp_path)
    mark.write_text("")
    mark.chmod(0o600)
    _made_while_locked(base, mark)


def _held_while_made(monkeypatch, base, probe) -> bool:
    """Whether ``_marked(base)`` holds a lock on the file at ``probe`` while it makes the
    directory (``make`` replaced by one that looks, and makes nothing)."""
    seen = []

    def make(where):
        fd = os.open(probe, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO's open waits for no writer
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append(False)
        except BlockingIOError:
            seen.append(True)
        finally:
            os.close(fd)
        return str(where), -1

    monkeypatch.setattr(scratch, "make", make)
    scratch._marked(str(base))
    return seen == [True]


def test_the_users_own_mark_is_held_while_a_directory_is_made(tmp_path, monkeypatch):
    base, mark = _base(tmp_path)
    assert _held_while_made(monkeypatch, base, mark)
    assert os.stat(mark).st_nlink == 1


def test_a_mark_with_another_name_is_not_locked(tmp_path, monkeypatch):
    victim = tmp_path / "victim.lock"
    victim.write_text("data\n")
    base, mark = _base(tmp_path)
    os.link(victim, mark)
    assert not _held_while_made(monkeypatch, base, victim), "a file linked at the mark's name was locked"


def test_a_fifo_at_the_marks_name_is_not_locked(tmp_path, monkeypatch):
    """(A directory there is refused by the open itself: ``O_CREAT`` on a directory fails.)"""
    base, mark = _base(tmp_path)
    os.mkfifo(mark, 0o600)
    assert not _held_while_made(monkeypatch, base, mark), "a FIFO at the mark's name was locked"


def test_another_users_file_at_the_marks_name_is_not_locked(tmp_path, monkeypatch, other_user):  # noqa: F811
    base, mark = _base(tmp_path)
    mark.write_text("")
    os.chown(mark, other_user.pw_uid, other_user.pw_gid)
    assert not _held_while_made(monkeypatch, base, mark), "another user's mark was locked"


def _left_and_marked(tmp_path):
    """A base holding a killed service's directory (unlocked, its pid alive nowhere)."""
    base, mark = _base(tmp_path)
    left = base / f"processkit-api-{_dead_pid()}-left"
    left.mkdir(mode=0o700)
    return base, mark, left


def test_the_users_own_mark_has_its_base_swept_and_is_removed(tmp_path):
    base, mark, left = _left_and_marked(tmp_path)
    mark.write_text("")
    scratch._sweep_marked(str(base))
    assert not left.exists() and not mark.exists()


def test_a_directory_at_the_marks_name_has_nothing_swept(tmp_path):
    base, mark, left = _left_and_marked(tmp_path)
    mark.mkdir()
    scratch._sweep_marked(str(base))
    assert left.exists() and mark.is_dir()


def test_another_users_mark_has_nothing_swept_or_removed(tmp_path, other_user):  # noqa: F811
    base, mark, left = _left_and_marked(tmp_path)
    mark.write_text("")
    os.chown(mark, other_user.pw_uid, other_user.pw_gid)
    scratch._sweep_marked(str(base))
    assert left.exists() and mark.exists()
