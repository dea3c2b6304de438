"""A run's cgroup v2 group is a subtree: a process in it may make a group below it and move
into it (``cgroup.procs`` lists only a group's own members). The teardown kills and counts the
whole subtree, removes it bottom-up, and ``prune`` reaps the subtree a SIGKILLed runner left."""

from __future__ import annotations

import glob
import os
import signal
import time

import pytest

from conftest import SAFETY_NET, pid_alive, read_events_tolerant, run_cli, start_cli, wait_for_event, wait_for_file
from streams import by_name, one, python_child, require_mechanism, run_checked
from own_tmp import own_tmp  # noqa: F401

# The child makes a group below its own, moves a sleeping grandchild into it, and exits (or,
# with "stay", sleeps too): the grandchild is no member of the run's group by its own list.
ESCAPE_BELOW = r"""
import os, sys, time
where, stay = sys.argv[1], sys.argv[2] == "stay"
own = open("/proc/self/cgroup").read().split("0::", 1)[1].split("\n", 1)[0]
mount = next(f[4] for f in map(str.split, open("/proc/self/mountinfo")) if f[f.index("-") + 1] == "cgroup2")
group = mount + own
os.mkdir(group + "/sub")
os.mkdir(group + "/sub/deeper")
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.read(read, 1)  # moved by then
    time.sleep(60)
    os._exit(0)
with open(group + "/sub/deeper/cgroup.procs", "w") as procs:
    procs.write(str(pid))
os.write(write, b"x")
with open(where + "/group.tmp", "w") as handle:
    handle.write(group)
with open(where + "/escapee.tmp", "w") as handle:
    handle.write(str(pid))
os.replace(where + "/group.tmp", where + "/group")
os.replace(where + "/escapee.tmp", where + "/escapee")
if stay:
    time.sleep(60)
"""


def v2_runs() -> bool:
    """Whether runs here can get a cgroup v2 group at all (else the tests skip)."""
    with open("/proc/self/mountinfo") as handle:
        return any(f[f.index("-") + 1] == "cgroup2" for f in map(str.split, handle))


pytestmark = pytest.mark.skipif(not v2_runs() or os.geteuid() != 0, reason="no cgroup v2 to delegate here")


@pytest.fixture
def escapee(tmp_path):
    """The grandchild's pid once written; killed when the test ends if it survived."""
    found: list[int] = []
    yield found
    pid_file = tmp_path / "escapee"
    if pid_file.exists():
        pid = int(pid_file.read_text())
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    group = tmp_path / "group"
    if group.exists():
        for path in (f"{group.read_text()}/sub/deeper", f"{group.read_text()}/sub", group.read_text()):
            try:
                os.rmdir(path)
            except OSError:
                pass


def test_a_process_moved_below_the_runs_group_is_killed_counted_and_its_group_removed(tmp_path, escapee):
    _, events = run_checked(tmp_path, command=python_child(ESCAPE_BELOW) + [str(tmp_path), "exit"], returncode=0)
    require_mechanism(events, "cgroup_v2")
    pid, group = int((tmp_path / "escapee").read_text()), (tmp_path / "group").read_text()
    deadline = time.monotonic() + SAFETY_NET
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not pid_alive(pid), "the process moved below the run's group outlived the run"
    started, finished = one(events, "cleanup_started"), one(events, "cleanup_finished")
    assert started["members_before"] == 1, "the process below the run's group is a member"
    assert (finished["remaining"], finished["remaining_pids"], finished["kill_error"]) == (0, [], False)
    assert not os.path.exists(group), "the run's group (and the groups below it) outlived the run"


def test_members_below_the_runs_group_are_in_every_snapshot_and_in_the_soft_stop(tmp_path, escapee):
    jsonl = tmp_path / "run.jsonl"
    command = python_child(ESCAPE_BELOW) + [str(tmp_path), "stay"]
    proc = start_cli("run", "--jsonl", jsonl, "--grace", "2s", "--snapshot-interval", "50ms", "--", *command)
    try:
        wait_for_file(tmp_path / "escapee")
        pid = int((tmp_path / "escapee").read_text())
        root = one(read_events_tolerant(jsonl), "run_started")["root_pid"]
        deadline = time.monotonic() + SAFETY_NET
        seen: set[int] = set()
        while pid not in seen and time.monotonic() < deadline:
            snapshots = by_name(read_events_tolerant(jsonl), "members_snapshot")
            seen = {member["pid"] for member in snapshots[-1]["members"]} if snapshots else set()
            time.sleep(0.05)
        assert {root, pid} <= seen, "a snapshot leaves out the member below the run's group"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=SAFETY_NET)
    events = read_events_tolerant(jsonl)
    require_mechanism(events, "cgroup_v2")
    finished = one(events, "cleanup_finished")
    assert finished["shutdown"]["members_before"] == 2
    assert finished["shutdown"]["drained_within_grace"], "SIGTERM reached the member below the group"
    assert finished["remaining"] == 0 and not pid_alive(pid)
    assert not os.path.exists((tmp_path / "group").read_text())


def test_prune_reaps_the_subtree_a_sigkilled_runner_left(tmp_path, escapee, own_tmp):
    """The killed run's directory is in the test's own /tmp (``own_tmp``): another worker's prune
    or sweep would end the subtree before the test sees it outlive its runner."""
    jsonl = tmp_path / "run.jsonl"
    proc = start_cli("run", "--jsonl", jsonl, "--", *python_child(ESCAPE_BELOW), str(tmp_path), "stay")
    try:
        wait_for_file(tmp_path / "escapee")
        wait_for_event(jsonl, "members_snapshot")
    finally:
        proc.kill()
        proc.communicate(timeout=SAFETY_NET)
    started = one(read_events_tolerant(jsonl), "run_started")
    require_mechanism([started], "cgroup_v2")
    pid, group = int((tmp_path / "escapee").read_text()), (tmp_path / "group").read_text()
    assert pid_alive(pid), "the process below the group outlives its SIGKILLed runner until prune"
    reaped = run_cli("prune", "--json", "--report-reaped")
    assert reaped.returncode == 0, reaped.stderr
    assert not pid_alive(pid), "prune left the process below the dead run's group"
    assert not os.path.exists(group), "prune left the dead run's group or a group below it"
    assert glob.glob(f"{group}*") == []


@pytest.fixture
def sleeper():
    import subprocess

    child = subprocess.Popen(["sleep", "30"])
    yield child
    child.kill()
    child.wait()


def test_without_cgroup_kill_every_group_below_is_killed_member_by_member(monkeypatch, sleeper):
    """A kernel before 5.14 has no ``cgroup.kill``: the teardown signals the members it reads,
    the subtree's included."""
    from processkit.containment import cgroup_v2, cgroupfs

    parent = cgroup_v2.find_parent()
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    group = cgroup_v2.CgroupV2(parent, f"processkit-test-{os.getpid()}")
    try:
        below = os.path.join(group.path, "below", "deeper")
        os.makedirs(below)
        with open(os.path.join(below, "cgroup.procs"), "w") as procs:
            procs.write(str(sleeper.pid))
        assert group.member_pids() == [sleeper.pid]
        real_write = cgroupfs.write_text

        def no_kill_file(path, text):
            if path.endswith("cgroup.kill"):
                raise FileNotFoundError(path)
            real_write(path, text)

        monkeypatch.setattr(cgroupfs, "write_text", no_kill_file)
        group.kill_all()
        assert sleeper.wait(timeout=60) == -signal.SIGKILL
        assert group.member_pids() == []
    finally:
        group.release()
    assert not os.path.exists(group.path), "the group and those below it outlived its release"


def test_the_sweep_kills_and_removes_a_v1_groups_subtree(sleeper):
    """A dead run's cgroup v1 group (a cap or accounting group) with a member in a group below
    it: the sweep kills that member and removes both, deepest first."""
    from processkit.containment import cgroup_v1, sweep, sweep_dead

    parent = cgroup_v1.own_groups().get("pids")
    if parent is None or not os.access(parent, os.W_OK):
        pytest.skip("no writable cgroup v1 pids hierarchy here")
    group = os.path.join(parent, f"processkit-test-{os.getpid()}")
    below = os.path.join(group, "below")
    os.makedirs(below)
    try:
        with open(os.path.join(below, "tasks"), "w") as tasks:
            tasks.write(str(sleeper.pid))
        reaped = sweep.Reaped()
        assert sweep_dead._end_group(group, os.geteuid(), reaped, dry_run=False, wait=True)
        assert sleeper.wait(timeout=60) == -signal.SIGKILL
        assert reaped.processes == 1 and reaped.groups == [group]
        assert not os.path.exists(group)
    finally:
        for path in (below, group):
            if os.path.exists(path):
                with open(os.path.join(path, "tasks")) as tasks:
                    for pid in tasks.read().split():
                        with open(os.path.join(parent, "tasks"), "w") as up:
                            up.write(pid)
                os.rmdir(path)


def test_prune_waits_for_a_killed_member_that_is_slow_to_exit(monkeypatch, sleeper):
    """A SIGKILLed member leaves its group only once it has run and exited, which a loaded host
    can put off for longer than the rmdir's 50 retries (``prune left the dead run's group``):
    ``prune`` waits on the group emptying, within a bound. The slow exit is a member frozen in
    a cgroup v1 freezer group (killed, it stays until thawed), thawed at the sweep's 60th pause;
    the pauses are counted, not slept, up to then."""
    from processkit import mountinfo
    from processkit.containment import cgroup_v2, cgroupfs, sweep, sweep_dead

    parent = cgroup_v2.find_parent()
    roots = [
        m.mount_point for m in mountinfo.mounts() if m.fstype == "cgroup" and "freezer" in m.super_options.split(",")
    ]
    if parent is None or not roots or not os.access(roots[0], os.W_OK):
        pytest.skip("no cgroup v2 parent group and writable cgroup v1 freezer here")
    group = os.path.join(parent, f"processkit-test-{os.getpid()}")
    freezer = os.path.join(roots[0], f"processkit-test-{os.getpid()}")
    os.mkdir(group)
    os.mkdir(freezer)
    pauses, real_sleep = [], time.sleep

    def pause(seconds):
        pauses.append(seconds)
        if len(pauses) == cgroupfs.RMDIR_ATTEMPTS + 10:
            cgroupfs.write_text(os.path.join(freezer, "freezer.state"), "THAWED")
        if len(pauses) >= cgroupfs.RMDIR_ATTEMPTS + 10:
            real_sleep(seconds)

    try:
        for where in (group, freezer):
            cgroupfs.write_text(os.path.join(where, "cgroup.procs"), str(sleeper.pid))
        cgroupfs.write_text(os.path.join(freezer, "freezer.state"), "FROZEN")
        deadline = time.monotonic() + SAFETY_NET
        while cgroupfs.read_text(os.path.join(freezer, "freezer.state")).strip() != "FROZEN":
            assert time.monotonic() < deadline, "the member never froze"
            real_sleep(0.01)  # FREEZING until every member is frozen
        monkeypatch.setattr(time, "sleep", pause)
        reaped = sweep.Reaped()
        assert sweep_dead._end_group(group, os.geteuid(), reaped, dry_run=False, wait=True), reaped.left
        assert len(pauses) >= cgroupfs.RMDIR_ATTEMPTS + 10, "the member was not held by its freeze"
        assert sleeper.wait(timeout=SAFETY_NET) == -signal.SIGKILL
        assert reaped.groups == [group] and not os.path.exists(group)
    finally:
        monkeypatch.undo()
        cgroupfs.write_text(os.path.join(freezer, "freezer.state"), "THAWED")
        sleeper.kill()
        sleeper.wait()
        os.rmdir(freezer)
        if os.path.exists(group):
            os.rmdir(group)


def test_a_subtree_deeper_than_the_interpreters_recursion_limit_is_counted_and_removed(sleeper):
    """A run's process may nest groups as deep as the kernel lets it: the walk has no depth of
    its own to run out of."""
    import sys

    from processkit.containment import cgroup_v2

    parent = cgroup_v2.find_parent()
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    group = cgroup_v2.CgroupV2(parent, f"processkit-test-{os.getpid()}")
    deepest = group.path
    limit = sys.getrecursionlimit()
    try:
        for _ in range(300):  # each group made costs the kernel about 1 ms
            deepest += "/g"
            os.mkdir(deepest)
        with open(os.path.join(deepest, "cgroup.procs"), "w") as procs:
            procs.write(str(sleeper.pid))
        sys.setrecursionlimit(200)  # the walk must not need a frame per level
        assert group.member_pids() == [sleeper.pid]
        group.kill_all()
        assert sleeper.wait(timeout=60) == -signal.SIGKILL
        group.release()
    finally:
        sys.setrecursionlimit(limit)
        group.release()
    assert not os.path.exists(group.path)


def test_a_batch_job_that_moves_a_process_below_its_lent_group_has_it_killed(tmp_path, escapee):
    """The same on a lodged host, whose v2 groups are lent from job to job: the process below
    the job's group is killed with the job, its groups go, and the next job gets another group."""
    import json

    from test_batch import write_manifest

    jobs = [
        {"args": ["cat", "/proc/self/cgroup"], "id": "before"},
        {"args": python_child(ESCAPE_BELOW) + [str(tmp_path), "exit"], "id": "moves_one_below"},
        {"args": ["cat", "/proc/self/cgroup"], "id": "next"},
    ]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    pid, group = int((tmp_path / "escapee").read_text()), (tmp_path / "group").read_text()
    assert not pid_alive(pid), "the process below the job's group outlived the job"
    events = [json.loads(line) for line in (out / "moves_one_below" / "events.jsonl").read_text().splitlines()]
    require_mechanism(events, "cgroup_v2")
    assert one(events, "cleanup_started")["members_before"] == 1
    assert one(events, "cleanup_finished")["remaining"] == 0
    assert not os.path.exists(group)
    assert group not in (out / "next" / "capture" / "stdout.log").read_text()


def test_holds_reads_the_peers_own_cgroup_file_not_the_groups_lists(monkeypatch, sleeper):
    """The control socket asks ``holds`` at each connection: it read the group's member lists
    (and those below), a cost that grows with the run; it reads the peer's ``/proc/<pid>/cgroup``."""
    from processkit.containment import cgroup_v2

    parent = cgroup_v2.find_parent()
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    group = cgroup_v2.CgroupV2(parent, f"processkit-test-{os.getpid()}")
    try:
        below = os.path.join(group.path, "below")
        os.makedirs(below)
        with open(os.path.join(below, "cgroup.procs"), "w") as procs:
            procs.write(str(sleeper.pid))

        def no_lists():
            raise AssertionError("the group's member lists were read")

        monkeypatch.setattr(group, "member_pids", no_lists)
        assert group.holds(sleeper.pid)
        assert not group.holds(os.getpid())
        monkeypatch.undo()  # the kill reads them: what cgroup.kill misses is killed by its pid
        group.kill_all()
        assert sleeper.wait(timeout=60) == -signal.SIGKILL
    finally:
        group.release()
