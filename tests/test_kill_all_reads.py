"""``CgroupV2.kill_all``'s look, after ``cgroup.kill``, for a member whose main thread ended
alone (the kill misses it): it read ``/proc/<pid>/stat`` of every member ``cgroup.procs`` still
listed, on the runner's loop, which a group of two thousand members still exiting held for
tens of milliseconds on a loaded host (bench/README.md, "(contain60)"). A member whose main
thread ``cgroup.threads`` lists is not such a process: only the others are read now, and the
one that is still gets its SIGKILL."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time

import pytest

from test_engine_per_run import _v2_parent
from test_zombie_leader import WORKER_LIVES_ON

MEMBERS = 40


def _in_group(procs: str, argv: list[str]) -> subprocess.Popen:
    """``argv`` started in the group whose ``cgroup.procs`` is ``procs`` (it joins before its exec)."""

    def join() -> None:
        with open(procs, "w") as handle:
            handle.write(str(os.getpid()))

    return subprocess.Popen(argv, stdin=subprocess.PIPE, preexec_fn=join)


@pytest.fixture
def alone_in_group(tmp_path):
    """A v2 group of ``MEMBERS`` live members and one whose main thread has ended alone, its
    other thread running on: (the group, that one, every member)."""
    from processkit import rundir
    from processkit.containment import cgroup_v2, members, pool

    parent = _v2_parent()
    if parent is None:
        pytest.skip("no writable cgroup v2 parent group here")
    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    group = cgroup_v2.CgroupV2(parent, "unused", lender)
    procs = os.path.join(group.path, "cgroup.procs")
    started: list[subprocess.Popen] = []
    try:
        started += [_in_group(procs, ["cat"]) for _ in range(MEMBERS)]  # live, single-threaded, quick to start
        where = str(tmp_path / "alone")
        alone = _in_group(procs, [sys.executable, "-c", WORKER_LIVES_ON, where])
        started.append(alone)
        deadline = time.monotonic() + 60
        while not os.path.exists(where):  # it writes its pid, then ends its main thread
            assert alone.poll() is None and time.monotonic() < deadline, "the worker never wrote its pid"
            time.sleep(0.01)
        while members.read_stat(alone.pid)[1][0] != b"Z":  # its main thread has ended
            assert alone.poll() is None and time.monotonic() < deadline, "its main thread never ended"
            time.sleep(0.01)
        yield group, alone, started
    finally:
        for process in started:
            process.kill()
            process.wait()
        group.release()
        lender.close()
        home.close()


def _kill_written_as_nothing(monkeypatch) -> None:
    """cgroup.kill written as nothing, so the live members live on to be looked at (or not)."""
    from processkit.containment import cgroupfs

    write = cgroupfs.write_text
    monkeypatch.setattr(cgroupfs, "write_text", lambda path, text: path.endswith("/cgroup.kill") or write(path, text))


def test_only_members_whose_main_thread_is_gone_are_read_and_such_a_one_is_killed(alone_in_group, monkeypatch):
    from processkit.containment import members

    group, alone, started = alone_in_group
    read: list[int] = []
    real = members.read_stat
    monkeypatch.setattr(members, "read_stat", lambda pid: read.append(pid) or real(pid))
    assert len(group.member_pids()) == MEMBERS + 1
    _kill_written_as_nothing(monkeypatch)
    group.kill_all()
    assert set(read) == {alone.pid}  # read again at its pinned kill (members.started_at)
    assert alone.wait(timeout=60) == -9
    assert all(process.poll() is None for process in started[:MEMBERS])


def test_a_group_below_that_cannot_be_read_skips_no_member(alone_in_group, monkeypatch):
    # A group below, removed between its open and its read, answers ENODEV, not ENOENT: the
    # look for threads once raised it, and kill_all's look for such a member ended there.
    group, alone, _ = alone_in_group
    below = os.path.join(group.path, "below")
    os.mkdir(below)
    try:
        real_open = os.open

        def gone_at_read(path, *args, **kwargs):
            if str(path) == os.path.join(below, "cgroup.threads"):
                raise OSError(errno.ENODEV, os.strerror(errno.ENODEV), path)
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", gone_at_read)
        _kill_written_as_nothing(monkeypatch)
        group.kill_all()
        monkeypatch.undo()
        assert alone.wait(timeout=60) == -9
    finally:
        os.rmdir(below)
