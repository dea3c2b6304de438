"""``prune``'s wait on a dead run's group emptying (``cgroupfs.emptied``) took a group it could
not read for an empty one: the wait ended at once, and the group the sweep then could not remove
was said to hold ``members remain (not yet exited, or out of reach)``, the read's failure and
its errno lost. A group that cannot be read is no empty group now: the sweep says
``its members could not be read: Permission denied (os error 13)``. A group gone meanwhile
(ENOENT, ENODEV) is still empty.

The refusal is simulated (a root sweeper is never refused): the group's ``cgroup.events`` read
and its ``cgroup.kill`` write raise EACCES, so its real member, a sleeper, stays in it."""

from __future__ import annotations

import errno
import os
import subprocess
import time

import pytest

from conftest import SAFETY_NET


def _refused(*_args):
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))


@pytest.fixture
def group_with_member():
    from processkit.containment import cgroup_v2, cgroupfs

    parent = cgroup_v2.find_parent()
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    group = os.path.join(parent, f"processkit-test-unread-{os.getpid()}")
    os.mkdir(group)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        cgroupfs.write_text(os.path.join(group, "cgroup.procs"), str(sleeper.pid))
        yield group
    finally:
        sleeper.kill()
        sleeper.wait()
        deadline = time.monotonic() + SAFETY_NET
        while os.path.exists(group):  # the killed sleeper leaves its group once it has exited
            try:
                os.rmdir(group)
            except OSError:
                assert time.monotonic() < deadline, "the test's group stayed populated"
                time.sleep(0.01)


def test_a_group_prune_cannot_read_is_said_unread_not_said_emptied(group_with_member, monkeypatch):
    from processkit.containment import cgroupfs, sweep, sweep_dead

    monkeypatch.setattr(cgroupfs, "key_in", _refused)
    monkeypatch.setattr(cgroupfs, "write_text", _refused)
    reaped = sweep.Reaped()
    assert not sweep_dead._end_group(group_with_member, os.geteuid(), reaped, dry_run=False, wait=True)
    assert reaped.left == [
        {"what": group_with_member, "reason": "its members could not be read: Permission denied (os error 13)"}
    ]


def test_a_group_gone_meanwhile_is_still_empty(tmp_path):
    from processkit.containment import cgroupfs

    assert cgroupfs.emptied(str(tmp_path / "gone"), time.monotonic() + SAFETY_NET) is True
