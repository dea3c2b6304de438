"""The runner service's scratch directory is made under a hidden name and renamed to a service's
name: that name is fresh random bytes, tried again when taken, so another user who made it first
(the base is world-listable, as /dev/shm) cannot keep the service from starting (review of
attack55b). Before, it was the hidden name without its dot: a user watching the base made it
first, the rename failed (EPERM in a sticky base) and the service could not start.

The name is planted by the test at the moment of the rename (the attacker winning its race, or a
lucky guess), in a sticky directory the test made: nothing outside it is touched."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile

import pytest

from processkit.service import scratch
from test_other_users import other_user  # noqa: F401 - the fixture: a second OS user

real_rename = os.rename


@pytest.fixture
def sticky():
    """A world-writable sticky directory of root's, as /dev/shm (under /tmp: the second user
    cannot enter pytest's own tmp_path)."""
    path = tempfile.mkdtemp(prefix="pk-scratch-")
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path)


def test_a_name_another_user_made_first_is_passed_over(sticky, other_user):  # noqa: F811
    """The service runs as a user that is not root (the sticky bit binds it); the name it is
    about to take is made first by another user (root, here), as the reviewer's watcher of
    /dev/shm did."""
    to_parent, from_child = os.pipe()
    to_child, from_parent = os.pipe()
    pid = os.fork()
    if pid == 0:  # the service's user: report the name at the rename, wait for the plant
        code = 1
        try:
            os.close(to_parent)
            os.close(from_parent)
            os.setgroups([])
            os.setresgid(other_user.pw_gid, other_user.pw_gid, other_user.pw_gid)
            os.setresuid(other_user.pw_uid, other_user.pw_uid, other_user.pw_uid)
            planted: list[str] = []

            def rename(source, target):
                if not planted:
                    planted.append(target)
                    os.write(from_child, os.fsencode(target) + b"\n")
                    os.read(to_child, 1)
                return real_rename(source, target)

            os.rename = rename  # type: ignore[assignment] - this forked child's alone
            try:
                path, lock = scratch.make(sticky)
            except OSError as exc:
                os.write(from_child, f"failed {exc}\n".encode())
            else:
                os.write(from_child, f"made {path}\n".encode())
                scratch.remove(path, lock)
            code = 0
        finally:
            os._exit(code)
    os.close(from_child)
    os.close(to_child)
    try:
        with os.fdopen(to_parent, "rb") as said:
            target = said.readline().decode().strip()
            assert os.path.dirname(target) == sticky, target
            os.mkdir(target)  # root's, empty: the service's user may not replace it in a sticky base
            os.write(from_parent, b"x")
            result = said.readline().decode().strip()
    finally:
        os.close(from_parent)  # the child waits on it no longer, whatever failed here
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert result.startswith("made "), f"the service could not start: {result}"
    made = result[len("made ") :]
    assert made != target and os.path.basename(made).startswith(scratch.SCRATCH_PREFIX)
    assert os.path.isdir(target), "the other user's directory is left alone"
    assert sorted(os.listdir(sticky)) == [os.path.basename(target)], "nothing of the service's left"


def test_names_taken_each_time_end_in_a_clear_error_and_leave_nothing(tmp_path, monkeypatch):
    """A bounded number of fresh names, each a new one, then one error that says so; the
    directory made under the hidden name is removed."""
    tried: list[str] = []

    def rename(source, target):
        tried.append(target)
        os.mkdir(target)  # taken, by a directory that is not empty (ENOTEMPTY)
        open(os.path.join(target, "theirs"), "w").close()
        return real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError) as raised:
        scratch.make(str(tmp_path))
    assert raised.value.errno == errno.EEXIST
    assert f"each of {scratch.NAME_TRIES} fresh names" in str(raised.value), raised.value
    assert len(tried) == scratch.NAME_TRIES and len(set(tried)) == len(tried)
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(name) for name in tried)
