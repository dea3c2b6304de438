"""A grandchild whose leader thread ended alone (``pthread_exit``) while a thread of it ran on,
the run's pipes held meanwhile by a sibling that lets them go as that last thread begins its
exit, a large memory to free: the runner read the members as the thread was freeing it. Its
group's ``cgroup.procs`` leaves such a process out once its last thread's exit has begun, while
that thread keeps the group populated until the exit is done, so the lists read empty three
times and the read was taken as failed: `resource_summary` and `cleanup_started` said
`read_error: true` (every figure null, the members not counted) of a tree that was only
finishing its exit, on most runs, under either pump. A subtree whose every listed thread has
begun its exit now holds their processes, members until their exit is done, which the
teardown waits out; nor is such a process (or one whose last thread exits) said to be left
running by the child."""

from __future__ import annotations

import pytest
from conftest import read_events, run_cli
from streams import PY, one, require_mechanism

from processkit.containment import cgroupfs
from processkit.containment.cgroup_v2 import CgroupV2

# The sibling polls the thread's stat for PF_EXITING (0x4, its flags the 9th field), then exits.
TREE = r"""
import ctypes, mmap, os, threading, time
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    def work():
        m = mmap.mmap(-1, 1 << 29)
        for at in range(0, 1 << 29, 4096):
            m[at] = 1
        os.write(w, b"%d\n" % threading.get_native_id())
        time.sleep(0.2)
        os._exit(0)
    threading.Thread(target=work).start()
    ctypes.CDLL(None).pthread_exit(None)
os.close(w)
if os.fork() == 0:
    tid = int(os.read(r, 64))
    while True:
        try:
            with open(f"/proc/{tid}/stat", "rb") as f:
                if int(f.read().rsplit(b")", 1)[1].split()[7]) & 0x4:
                    break
        except (OSError, ValueError):
            break
    os._exit(0)
"""


def test_a_tree_finishing_its_exit_is_no_read_error_nor_left_running(tmp_path, pump_backend):
    counted = []  # cleanup_started's members_before, per attempt
    for attempt in range(8):  # the window is the last thread's exit: most runs fell in it before
        stream = tmp_path / f"run-{attempt}.jsonl"
        ran = run_cli("run", "--jsonl", stream, "--", PY, "-c", TREE, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        events = read_events(stream)
        require_mechanism(events, "cgroup_v2")
        assert one(events, "resource_summary")["read_error"] is False, (attempt, events)
        started = one(events, "cleanup_started")
        assert started["read_error"] is False, (attempt, started)
        counted.append(started["members_before"])
        finished = one(events, "cleanup_finished")
        assert finished["read_error"] is False and finished["remaining"] == 0, (attempt, finished)
        assert b"still running" not in ran.stderr, ran.stderr  # it was on its way out, not left running
        if counted[-1] == 1:
            break  # a run that fell in the window: its exiting process counted, through its threads
    assert 1 in counted, counted  # else no attempt fell in the window: nothing was shown


def _group(path) -> CgroupV2:
    """A stand-in v2 group: a directory with the files ``member_pids`` reads, both lists empty."""
    path.mkdir()
    for name, text in (("cgroup.events", "populated 1\n"), ("cgroup.procs", ""), ("cgroup.threads", "")):
        (path / name).write_text(text)
    group = CgroupV2.__new__(CgroupV2)
    group.path, group._dir_fd = str(path), -1
    return group


@pytest.mark.parametrize("unreadable_below", [False, True])
def test_a_populated_subtree_listing_no_thread_is_a_read_error_not_empty(tmp_path, unreadable_below):
    """A member moving between groups that every read missed, or one in a group below whose
    ``cgroup.threads`` cannot be read (the child owns the groups it makes): the subtree is
    populated, so its members are not none."""
    group = _group(tmp_path / "g")
    if unreadable_below:
        (tmp_path / "g" / "below").mkdir()  # no cgroup.threads to read
    with pytest.raises(OSError):
        group.member_pids()


def test_a_subtree_that_lists_no_thread_once_emptied_has_no_members(tmp_path, monkeypatch):
    group = _group(tmp_path / "g")
    reads = iter([True, True, True, False])  # populated through the three reads, then emptied
    monkeypatch.setattr(cgroupfs, "populated", lambda where: next(reads))
    assert group.member_pids() == []
