"""A lodged host's runs reuse its cgroups (``containment/pool.py``): which groups a batch's jobs
share, that every figure a job reports is still its own, that a group something was left in is
never lent again, and that nothing stays once the batch is gone, or after a SIGKILL and ``prune``."""

from __future__ import annotations

import glob
import json
import os
import signal
import sys
import time

import pytest

from conftest import SAFETY_NET, pid_alive, run_cli, start_cli
import run_groups
from test_batch import write_manifest

CAT_GROUPS = ["cat", "/proc/self/cgroup"]  # one process: its groups are the job's
V2_ROOT = "/sys/fs/cgroup/unified"


def batch(tmp_path, jobs: list[dict], *extra: str) -> dict[str, dict]:
    """Run the jobs one at a time; each job's summary line, by id."""
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--jobs", "1", *extra)
    assert proc.returncode == 0, proc.stderr
    return {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}


def groups_of(tmp_path, job: str) -> dict[str, str]:
    """Controller (``v2`` for the unified group) -> the group path a CAT_GROUPS job printed."""
    found = {}
    for line in (tmp_path / "out" / job / "capture" / "stdout.log").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(","):
            found[name or "v2"] = path
    return found


def accounted() -> bool:
    with open("/proc/self/cgroup") as handle:
        names = {name for line in handle for name in line.split(":")[1].split(",")}
    return {"memory", "pids", "cpuacct"} <= names and os.access("/sys/fs/cgroup/pids", os.W_OK)


pytestmark = pytest.mark.skipif(not accounted(), reason="no writable cgroup v1 accounting hierarchies")


def test_jobs_share_the_groups_whose_figures_restart_and_each_keeps_its_own_figures(tmp_path, containment):
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    jobs = [
        {"args": CAT_GROUPS, "id": "first"},
        {"args": CAT_GROUPS, "id": "second"},
        {"args": ["sh", "-c", "sleep 0.05 & sleep 0.05 & wait"], "id": "three_at_once"},
        {"args": CAT_GROUPS, "id": "after_three"},
        {"args": [sys.executable, "-c", burn], "id": "burner"},
        {"args": CAT_GROUPS, "id": "after_burner"},
    ]
    lines = batch(tmp_path, jobs)
    first, second = groups_of(tmp_path, "first"), groups_of(tmp_path, "second")
    after_three, after_burner = groups_of(tmp_path, "after_three"), groups_of(tmp_path, "after_burner")
    assert first["cpuacct"] == second["cpuacct"] == after_three["cpuacct"] == after_burner["cpuacct"]
    assert first["pids"] == second["pids"], "a group whose peak was 1 is lent again"
    assert after_three["pids"] != second["pids"], "a pids group that saw three processes is not"
    if containment == "cgroup_v2":
        assert first["v2"] == second["v2"] == after_three["v2"]
    counts = {job: lines[job]["resources"]["peak_process_count"] for job in lines}
    assert counts == {job: 3 if job == "three_at_once" else 1 for job in lines}
    assert lines["burner"]["resources"]["total_cpu_ms"] >= 250
    assert lines["after_burner"]["resources"]["total_cpu_ms"] < 100, "the burner's CPU counted again"
    assert all(lines[job]["resources"]["peak_memory_bytes"] > 0 for job in lines)
    for controller in ("pids", "cpuacct"):
        assert not os.path.exists(f"/sys/fs/cgroup/{controller}{first[controller]}"), "a lent group outlived the batch"


MEMORY_ROOT = "/sys/fs/cgroup/memory"


def test_a_memory_group_is_lent_again_only_once_nothing_is_charged_to_it(tmp_path):
    """A job's memory group holds a charge after the job (kernel memory for a while, a tmpfs
    file's pages as long as it lives): a group is lent again only once that is gone, so a job's
    peak never holds another job's charge, and never one whose run changed its settings (the
    groups are lent again: test_a_memory_group_with_a_task_or_changed_settings_is_never_lent_again)."""
    left = f"/dev/shm/pk-pool-test-{os.getpid()}"
    own_group = MEMORY_ROOT + '$(sed -n "s/^[0-9]*:memory://p" /proc/self/cgroup)'
    jobs = [
        {
            "args": ["sh", "-c", f"cat /proc/self/cgroup; echo 100000000 > {own_group}/memory.limit_in_bytes"],
            "id": "caps",
        },
        {"args": ["sh", "-c", f"cat /proc/self/cgroup; head -c 33554432 /dev/zero > {left}"], "id": "leaves_32m"},
        {"args": CAT_GROUPS, "id": "first"},
    ]
    for n in range(5):
        # A per-CPU stock keeps a group's last charge until another group charges on that CPU:
        # processes started on every CPU take those charges off the groups idle meanwhile.
        churn = "cat /proc/self/cgroup; for i in 1 2 3 4 5 6; do sleep 0.05 & done; wait; sleep 0.2"
        jobs += [{"args": ["sh", "-c", churn], "id": f"pause{n}"}]
        jobs += [{"args": CAT_GROUPS, "id": f"after{n}"}]
    try:
        lines = batch(tmp_path, jobs)
    finally:
        if os.path.exists(left):
            os.unlink(left)
    memory = {job["id"]: groups_of(tmp_path, job["id"])["memory"] for job in jobs}
    assert lines["leaves_32m"]["resources"]["peak_memory_bytes"] >= 32 << 20
    others = [job["id"] for job in jobs[2:]]
    assert not {memory["leaves_32m"], memory["caps"]} & {memory[job] for job in others}
    for job in others:
        assert lines[job]["resources"]["peak_memory_bytes"] < 16 << 20, f"{job}'s peak holds another job's charge"


ESCAPE = """
import os, sys, time
print(open("/proc/self/cgroup").read(), end="", flush=True)
read, write = os.pipe()
if os.fork() == 0:
    null = os.open(os.devnull, os.O_WRONLY)  # the job's pipes left: its root's exit ends it at once
    os.dup2(null, 1)
    os.dup2(null, 2)
    with open(sys.argv[1] + "/cgroup.procs", "w") as procs:  # out of the run's v2 group, not its v1 ones
        procs.write(str(os.getpid()))
    with open(sys.argv[2], "w") as pid:
        pid.write(str(os.getpid()))
    os.write(write, b"x")
    end = time.monotonic() + 3
    while time.monotonic() < end:
        pass
    os._exit(0)
os.read(read, 1)
"""


def test_a_group_a_process_was_left_in_is_never_lent_to_the_next_job(tmp_path):
    """A process that left the run's v2 group survives its teardown inside the run's v1 groups
    (and burns CPU there): the next job gets other groups, and its figures hold none of it."""
    if not os.access(os.path.join(V2_ROOT, "cgroup.procs"), os.W_OK):
        pytest.skip("the unified root's cgroup.procs is not writable: no process can leave a run's group")
    pid_file = tmp_path / "escaped.pid"
    jobs = [
        {"args": CAT_GROUPS, "id": "before"},
        {"args": [sys.executable, "-c", ESCAPE, V2_ROOT, str(pid_file)], "id": "leaves_one"},
        {"args": CAT_GROUPS, "id": "next"},
        {"args": ["sleep", "0.5"], "id": "while_it_burns"},
    ]
    try:
        lines = batch(tmp_path, jobs)
    finally:
        if pid_file.exists() and pid_alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    left_in, following = groups_of(tmp_path, "leaves_one"), groups_of(tmp_path, "next")
    assert following["cpuacct"] != left_in["cpuacct"], "the group the escaped process burns in was lent again"
    assert lines["next"]["resources"]["peak_process_count"] == 1
    assert lines["while_it_burns"]["resources"]["total_cpu_ms"] < 100, "another job's process counted"


# One process (its pids group's peak stays 1, so the group would be lent again): writes its own
# pids group's limit, or makes a group below each of its own groups, and prints where.
OWN_GROUPS = """
import os, sys
lines = open("/proc/self/cgroup").read()
print(lines, end="", flush=True)
mounts = {}
for fields in map(str.split, open("/proc/self/mountinfo")):
    kind = fields[fields.index("-") + 1]
    for option in fields[-1].split(",") if kind == "cgroup" else ["" if kind == "cgroup2" else None]:
        mounts.setdefault(option, fields[4])
groups = {names: mounts[names.split(",")[0]] + path for _, names, path in (l.split(":", 2) for l in lines.split())
          if names.split(",")[0] in mounts}
if sys.argv[1] == "cap":
    with open(groups["pids"] + "/pids.max", "w") as limit:
        limit.write("1")
else:
    made = [groups[names] + "/below" for names in ("", "pids", "cpuacct", "memory") if names in groups]
    for path in made:
        os.mkdir(path)
        os.mkdir(path + "/deeper")
    with open(sys.argv[2], "w") as record:
        record.write("\\n".join(made))
"""


def test_a_job_that_caps_its_own_pids_group_never_caps_the_next(tmp_path):
    """A job's process may write its group's ``pids.max``: that group is not lent again (the
    next job, which forks, would be refused its fork)."""
    forks = ["sh", "-c", "cat /proc/self/cgroup; true"]
    jobs = [
        {"args": CAT_GROUPS, "id": "before"},
        {"args": [sys.executable, "-c", OWN_GROUPS, "cap"], "id": "caps"},
        {"args": forks, "id": "forks"},
    ]
    lines = batch(tmp_path, jobs)
    assert groups_of(tmp_path, "before")["pids"] == groups_of(tmp_path, "caps")["pids"], "lent again as made"
    assert lines["caps"]["resources"]["peak_process_count"] == 1
    assert lines["forks"]["exit_code"] == 0, "the job was capped by the one before"
    assert groups_of(tmp_path, "forks")["pids"] != groups_of(tmp_path, "caps")["pids"]


def test_groups_a_job_made_below_its_own_go_with_them_before_the_next_job(tmp_path):
    """A job's process makes groups below its v2 and v1 groups: they and the job's groups are
    removed when the job is done, not left for the next sweep."""
    record = tmp_path / "made"
    check = f'for group in $(cat {record}); do test -e "$group" && echo "$group"; done; true'
    jobs = [
        {"args": CAT_GROUPS, "id": "before"},
        {"args": [sys.executable, "-c", OWN_GROUPS, "below", str(record)], "id": "makes_groups"},
        {"args": ["sh", "-c", check], "id": "looks"},
    ]
    lines = batch(tmp_path, jobs)
    assert lines["makes_groups"]["exit_code"] == 0 and len(record.read_text().split()) >= 3
    assert (tmp_path / "out" / "looks" / "capture" / "stdout.log").read_text() == "", "a group outlived its job"


def test_a_frozen_or_limited_v2_group_is_not_lent_again():
    """A run's process may write its own v2 group's ``cgroup.freeze`` and exit before the
    freeze reaches it: a child cloned into that group would be frozen at birth. A group whose
    switches or limits read otherwise than as made is removed, not lent."""
    from processkit import rundir
    from processkit.containment import cgroup_v2, pool

    parent = cgroup_v2.find_parent()
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    for name, value in (("cgroup.freeze", "1"), ("cgroup.max.descendants", "0")):
        home = rundir.RunDir()
        home.holds_jobs = True
        lender = pool.Pool(home)
        try:
            group = lender.take(parent, pool.V2)
            with open(os.path.join(group.path, name), "w") as setting:
                setting.write(value)
            lender.give(group)
            taken = lender.take(parent, pool.V2)
            assert taken.path != group.path and not taken.reused, f"a group whose {name} was written is lent"
            with open(os.path.join(taken.path, name)) as setting:
                assert setting.read().strip() != value
            lender.give(taken)
        finally:
            lender.close()
            home.close()


def _no_sleep(*_):
    raise AssertionError("the pool slept on the loop")


def test_a_group_still_busy_is_removed_later_without_a_sleep(monkeypatch):
    """A group that cannot go yet (its last member still exiting) is not slept for: the pool
    tries it again on its next ``take`` (and, at ``close``, waits within a bound)."""
    import subprocess

    from processkit import rundir
    from processkit.containment import cgroup_v2, cgroupfs, pool

    parent = cgroup_v2.find_parent()
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        group = lender.take(parent, pool.V2)
        with open(os.path.join(group.path, "cgroup.procs"), "w") as procs:
            procs.write(str(sleeper.pid))
        group.killed = True  # as a teardown that wrote cgroup.kill leaves it, its member not yet gone
        monkeypatch.setattr(cgroupfs.time, "sleep", _no_sleep)
        lender.give(group)
        assert os.path.exists(group.path)
        with open(os.path.join(parent, "cgroup.procs"), "w") as procs:
            procs.write(str(sleeper.pid))  # the member gone from it
        taken = lender.take(parent, pool.V2)
        assert not os.path.exists(group.path), "the busy group was not tried again"
        lender.give(taken)
    finally:
        monkeypatch.undo()
        sleeper.kill()
        sleeper.wait()
        lender.close()
        home.close()


def test_a_v2_group_whose_counters_cannot_restart_is_not_kept_idle(monkeypatch):
    """On a pure cgroup v2 host the default accounting gives a run's group the memory, pids and
    io controllers, whose peaks and counters cannot start again: such a group is removed when
    its run gives it back (never parked, to be removed later on the loop), and the next run gets
    a fresh one. (This hybrid host's v2 tree has no controller: ``cgroup.controllers`` is made
    to read as a pure v2 host's.)"""
    from processkit import rundir
    from processkit.containment import cgroup_v2, cgroupfs, pool

    parent = cgroup_v2.find_parent()
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    real_text = cgroupfs.HeldFiles.text
    monkeypatch.setattr(
        cgroupfs.HeldFiles,
        "text",
        lambda files, name: "cpu memory pids io\n" if name == "cgroup.controllers" else real_text(files, name),
    )
    monkeypatch.setattr(cgroupfs.time, "sleep", _no_sleep)
    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    try:
        paths = []
        for _ in range(3):
            group = lender.take(parent, pool.V2)
            assert not group.reused
            paths.append(group.path)
            lender.give(group)
            assert not os.path.exists(group.path), "a group whose counters cannot restart was parked"
        assert len(set(paths)) == 3
    finally:
        monkeypatch.undo()
        lender.close()
        home.close()


def test_a_sigkilled_bench_leaves_no_group_its_pool_held_after_prune(tmp_path):
    bench = start_cli("bench", "--runs", "100000", "--warmup", "0", "--style", "none", "--", "true")
    try:
        deadline = time.monotonic() + SAFETY_NET
        pooled = []
        while not pooled and time.monotonic() < deadline:
            pooled = [group for group in run_groups.groups_of(bench.pid) if ".j" in os.path.basename(group)]
            time.sleep(0.05)
        assert pooled, "the bench's runs borrowed no group: the test shows nothing"
        time.sleep(0.2)  # several runs, so some groups are idle between two of them
    finally:
        bench.send_signal(signal.SIGKILL)
        bench.communicate(timeout=SAFETY_NET)
    proc = run_cli("prune", "--json", "--report-reaped")
    assert proc.returncode == 0, proc.stderr
    assert run_groups.groups_of(bench.pid) == []
    assert not glob.glob(f"/dev/shm/pkc-{bench.pid}-*") and not glob.glob(f"/tmp/pkc-{bench.pid}-*")


def test_a_finished_bench_leaves_no_group():
    bench = start_cli("bench", "--runs", "30", "--style", "none", "--", "true")
    _, stderr = bench.communicate(timeout=60)
    assert bench.returncode == 0, stderr
    assert run_groups.groups_of(bench.pid) == []


def test_a_job_that_leaves_a_process_behind_has_it_killed_and_the_next_job_still_starts(tmp_path, containment):
    """Teardown still kills what a job's root left in a lent group; a v2 group that took
    ``cgroup.kill`` would kill a child cloned into it at birth, so the next job gets another."""
    pid_file = tmp_path / "left.pid"
    jobs = [
        {"args": CAT_GROUPS, "id": "before"},
        {
            "args": ["sh", "-c", f"cat /proc/self/cgroup; sleep 30 >/dev/null 2>&1 & echo $! > {pid_file}"],
            "id": "leaves_sleep",
        },
        {"args": CAT_GROUPS, "id": "next"},
    ]
    lines = batch(tmp_path, jobs)
    assert [lines[job]["exit_code"] for job in ("before", "leaves_sleep", "next")] == [0, 0, 0]
    left = int(pid_file.read_text())
    assert not pid_alive(left), "the job's background process outlived its teardown"
    if containment == "cgroup_v2":
        assert groups_of(tmp_path, "next")["v2"] != groups_of(tmp_path, "leaves_sleep")["v2"]


@pytest.mark.parametrize("controller", ["pids", "memory", "cpuacct"])
def test_the_next_runs_group_is_ready_before_it_asks_and_still_empty_when_it_does(controller):
    """``restart_ahead`` (called once a child is spawned) starts an idle group again for the
    next ``take``, which lends it as it is; it makes none where none is idle (runs one after
    another keep cloning into the group the last one left); one a process joined since is
    removed, not lent."""
    import subprocess

    from processkit import rundir
    from processkit.containment import cgroup_v1, pool

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    parent = cgroup_v1.own_groups()[controller]
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        first = lender.take(parent, (controller,))
        lender.restart_ahead()
        assert len(run_groups.groups_of(os.getpid(), None, parent)) == 1, "a group was made ahead"
        second = lender.take(parent, (controller,))  # two runs in flight
        lender.give(second)
        lender.restart_ahead()
        again = lender.take(parent, (controller,))
        assert again is second and again.reused
        lender.give(again)
        lender.restart_ahead()
        with open(os.path.join(second.path, "tasks"), "w") as tasks:
            tasks.write(str(sleeper.pid))  # joined after it was started again
        third = lender.take(parent, (controller,))
        assert third.path not in (first.path, second.path), "a group holding a task was lent"
        lender.give(third)
        lender.give(first)
    finally:
        sleeper.kill()
        sleeper.wait()
        lender.close()
        home.close()
    assert run_groups.groups_of(os.getpid(), None, parent) == []


@pytest.mark.parametrize("controller", ["pids", "memory", "cpuacct"])
def test_an_idle_group_a_process_joined_is_not_lent_though_its_members_were_read_before(controller):
    """A v1 group keeps the member list a reader built while any fd reads it again within a
    second: a group checked empty once, then joined, must still be seen holding its task."""
    import subprocess

    from processkit import rundir
    from processkit.containment import cgroup_v1, pool

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    parent = cgroup_v1.own_groups()[controller]
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        for _ in range(3):  # checked empty as it is lent again, each check reading its members
            group = lender.take(parent, (controller,))
            lender.give(group)
        not_lent_once_joined(lender, parent, controller, group, sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
        lender.close()
        home.close()


def not_lent_once_joined(lender, parent: str, controller: str, group, pid: int) -> None:
    """``pid`` joins the idle ``group``: the pool's next take lends another group."""
    with open(os.path.join(group.path, "tasks"), "w") as tasks:
        tasks.write(str(pid))
    taken = lender.take(parent, (controller,))
    assert taken.path != group.path, "a group holding a task was lent"
    lender.give(taken)


def test_a_lodged_host_running_true_lends_its_memory_groups_again():
    """Runs that leave nothing charged once their kernel memory is freed get a group again
    (when the per-CPU stocks holding their last charge drain depends on the other groups' work,
    so how many is not asserted: the next test lends one deterministically), and each run's
    peak reads as a fresh group's. A memory group holds its join fd and its files (its
    settings, peak, swap: ``pool.IDLE_FILES``) while lent, and none while idle in a pool given no room for
    idle files (the batch gives its pool what its jobs leave of the open-file limit: the next
    tests); the pool holds one fd on their parent."""
    from processkit import rundir
    from processkit.containment import cgroup_v1, pool
    from processkit.containment.base import ChildJoins
    from processkit.engine import spawn_native

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    parent = cgroup_v1.own_groups()["memory"]
    paths, peaks = [], []
    held = len(os.listdir("/proc/self/fd")) + 1  # and the parent's, from the first take on
    try:
        for _ in range(40):
            group = lender.take(parent, ("memory",))
            assert held + 1 <= len(os.listdir("/proc/self/fd")) <= held + 1 + pool.IDLE_FILES
            paths.append(group.path)
            joins = ChildJoins(procs_fds=(group.join_fd,))
            child = spawn_native.Pending(
                ["true"], dict(os.environ), None, joins, [-1, -1, -1], False, 0, False, passed=()
            ).wait()
            assert child.stage == 0, os.strerror(child.error)
            os.waitpid(child.pid, 0)
            if child.pidfd >= 0:
                os.close(child.pidfd)
            with open(os.path.join(group.path, "memory.max_usage_in_bytes")) as peak:
                peaks.append(int(peak.read()))
            lender.give(group)
            assert len(os.listdir("/proc/self/fd")) == held
            time.sleep(0.03)
    finally:
        lender.close()
        home.close()
    made = [index for index, path in enumerate(paths) if paths.index(path) == index]
    fresh = max(peaks[index] for index in made)  # a batch of pages is charged at once: 256 KiB on x86-64
    assert all(0 < peak <= 2 * fresh for peak in peaks), "a lent group's peak holds an earlier run's charge"


def test_a_memory_group_with_a_task_or_changed_settings_is_never_lent_again():
    """A group nothing was ever charged to is lent again at once; one a process was moved into
    (its pages stay charged where they were, so the group's charge reads 0) or whose limit a
    run's process wrote is removed instead."""
    import subprocess

    from processkit import rundir
    from processkit.containment import cgroup_v1, pool

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    parent = cgroup_v1.own_groups()["memory"]
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        group = lender.take(parent, ("memory",))
        path = group.path
        lender.give(group)
        group = lender.take(parent, ("memory",))
        assert group.path == path, "an untouched group is lent again"
        with open(os.path.join(path, "tasks"), "w") as tasks:
            tasks.write(str(sleeper.pid))
        lender.give(group)
        group = lender.take(parent, ("memory",))
        assert group.path != path and not os.path.exists(path), "a group holding a task was lent again"
        assert sleeper.poll() is None, "the task is moved out, not killed"
        path = group.path
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as limit:
            limit.write("100000000")
        lender.give(group)
        group = lender.take(parent, ("memory",))
        assert group.path != path and not os.path.exists(path), "a group whose limit changed was lent again"
        lender.give(group)
    finally:
        sleeper.kill()
        sleeper.wait()
        lender.close()
        home.close()


def test_a_lent_groups_figures_are_read_through_its_held_files(monkeypatch):
    """A run on groups lent again opens no file to read its figures (the memory group's too):
    each is one ``pread`` of a file its group keeps open while lent; given back to a pool with no
    room for idle files, an idle memory group holds none."""
    from processkit import rundir
    from processkit.containment import cgroup_v1, pool
    from processkit.containment.accounting import Tally
    from processkit.spec import Limits

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    try:
        for round in ("made", "lent again"):  # a fresh group's files are opened on its first read
            groups = cgroup_v1.CgroupV1Controllers(Limits(), "unused", pool=lender)
            opened: list[str] = []
            real_open = os.open

            def counted(path, *args, opened=opened, real_open=real_open, **kwargs):
                opened.append(path)
                return real_open(path, *args, **kwargs)

            monkeypatch.setattr(os, "open", counted)
            tally = Tally()
            groups.account(tally)
            monkeypatch.setattr(os, "open", real_open)
            assert opened == [] or round == "made"
            assert all(lent.reused for lent in groups._lent) == (round == "lent again")
            assert {"peak_memory_bytes", "oom_kills", "cpu_ns", "peak_process_count"} <= tally.values.keys()
            memory = next(lent for lent in groups._lent if "memory" in lent.controllers)
            groups.release()
            assert memory.files._fds == {} and memory.join_fd == -1
    finally:
        lender.close()
        home.close()


@pytest.mark.parametrize("controller", ["cgroup2", "pids", "memory", "cpuacct"])
def test_a_group_with_a_group_below_it_is_never_lent_again_and_goes_with_them(controller):
    """A run's process may make groups inside its own: given back so, the group is removed at
    once with them, deepest first (not kept idle until the next sweep); an idle group one was
    made in meanwhile is not lent, whether the pool looks at it when a run asks or ahead of it,
    and goes with it too."""
    from processkit import rundir
    from processkit.containment import cgroup_v1, cgroup_v2, pool

    parent = cgroup_v2.find_parent() if controller == "cgroup2" else cgroup_v1.own_groups()[controller]
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    for when in ("during its run", "while idle", "while idle, looked at ahead"):
        home = rundir.RunDir()
        home.holds_jobs = True
        lender = pool.Pool(home)
        try:
            group = lender.take(parent, (controller,))
            below = os.path.join(group.path, "below", "deeper")
            if when == "during its run":
                os.makedirs(below)
                lender.give(group)
                assert not os.path.exists(group.path), "a group given back with groups below it was kept"
            else:
                lender.give(group)
                os.makedirs(below)
                if when.endswith("ahead"):
                    lender.restart_ahead()
            taken = lender.take(parent, (controller,))
            assert taken.path != group.path and not taken.reused
            assert not os.path.exists(group.path), "the group (or one below it) outlived its last use"
            lender.give(taken)
        finally:
            for path in (below, os.path.dirname(below), group.path):
                if os.path.exists(path):
                    os.rmdir(path)
            lender.close()
            home.close()


MEMBERS_READ = {"cgroup2": "cgroup.events", "pids": "pids.current", "cpuacct": "tasks"}


@pytest.mark.parametrize("controller", sorted(MEMBERS_READ))
def test_a_group_started_again_ahead_has_its_members_read_once(monkeypatch, controller):
    """Ahead of a run the pool only checks and restarts an idle group's counters; its members
    are read (afresh) once, when ``take`` lends it."""
    from processkit import rundir
    from processkit.containment import cgroup_v1, cgroup_v2, cgroupfs, pool

    parent = cgroup_v2.find_parent() if controller == "cgroup2" else cgroup_v1.own_groups()[controller]
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    reads = []
    real_members, real_content = cgroupfs.v1_has_members, cgroupfs.HeldFiles.content
    monkeypatch.setattr(
        cgroupfs, "v1_has_members", lambda path, parent_fd=None: reads.append("tasks") or real_members(path, parent_fd)
    )
    monkeypatch.setattr(
        cgroupfs.HeldFiles, "content", lambda files, name: reads.append(name) or real_content(files, name)
    )
    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    try:
        group = lender.take(parent, (controller,))
        lender.give(group)
        reads.clear()
        lender.restart_ahead()
        assert MEMBERS_READ[controller] not in reads
        again = lender.take(parent, (controller,))
        assert again is group and reads.count(MEMBERS_READ[controller]) == 1
        lender.give(again)
    finally:
        lender.close()
        home.close()


@pytest.mark.parametrize("controller", ["memory", "cpuacct"])
def test_a_pooled_groups_files_are_opened_through_the_pools_fd_on_its_parent(monkeypatch, controller):
    """Each open and stat of a lent group's files walks from the pool's directory fd on the
    parent (two components), not the whole cgroupfs path."""
    from processkit import rundir
    from processkit.containment import cgroup_v1, pool

    calls = []
    real_open, real_stat = os.open, os.stat

    def opened(path, flags, mode=0o777, *, dir_fd=None):
        calls.append((path, dir_fd))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    def stat(path, *, dir_fd=None, follow_symlinks=True):
        calls.append((path, dir_fd))
        return real_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    parent = cgroup_v1.own_groups()[controller]
    try:
        group = lender.take(parent, (controller,))
        lender.give(group)
        monkeypatch.setattr(os, "open", opened)
        monkeypatch.setattr(os, "stat", stat)
        again = lender.take(parent, (controller,))
        lender.give(again)
        monkeypatch.undo()
        assert again is group
        name = os.path.basename(group.path)
        ours = [(path, dir_fd) for path, dir_fd in calls if name in str(path)]
        assert ours and all(dir_fd is not None and not str(path).startswith("/") for path, dir_fd in ours), ours
    finally:
        monkeypatch.undo()
        lender.close()
        home.close()


def test_an_idle_memory_group_keeps_its_files_only_while_the_pools_room_holds_them(monkeypatch):
    """With room (``fdlimit.spare_descriptors``) an idle memory group keeps its four files open,
    never its tasks fd (which lists the members only when opened afresh), so starting it again
    opens that one file alone; a group given back past the room holds none."""
    from processkit import rundir
    from processkit.containment import cgroup_v1, pool

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home, idle_file_room=pool.IDLE_FILES)
    parent = cgroup_v1.own_groups()["memory"]
    try:
        first = lender.take(parent, ("memory",))
        lender.give(first)
        first = lender.take(parent, ("memory",))  # started again: each of its four files opened once
        second = lender.take(parent, ("memory",))
        baseline, second_files = len(os.listdir("/proc/self/fd")), second.files.count
        lender.give(first)
        lender.give(second)
        assert first.join_fd == second.join_fd == -1
        assert first.files.count == pool.IDLE_FILES and second.files.count == 0, "past the room: none held"
        assert len(os.listdir("/proc/self/fd")) == baseline - 2 - second_files
        opened: list[str] = []
        real_open = os.open
        monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(path) or real_open(path, *a, **k))
        again = lender.take(parent, ("memory",))  # the longest idle first
        monkeypatch.undo()
        assert again is first and [path.rsplit("/", 1)[1] for path in opened] == ["tasks"], opened
        lender.give(again)
    finally:
        monkeypatch.undo()
        lender.close()
        home.close()


def test_what_the_jobs_in_flight_leave_of_the_open_file_limit_is_the_pools_room(monkeypatch):
    """``runs_that_fit`` keeps what its runs leave of the limit for the pool's idle files; when
    fewer runs fit than asked, nothing is left."""
    import resource

    from processkit import fdlimit

    monkeypatch.setattr(resource, "getrlimit", lambda which: (2000, 2000))
    open_now = len(os.listdir("/proc/self/fd"))
    assert fdlimit.runs_that_fit(3) == 3
    assert fdlimit.spare_descriptors() == 2000 - open_now - fdlimit.DESCRIPTORS_KEPT - 3 * fdlimit.DESCRIPTORS_PER_JOB
    assert fdlimit.runs_that_fit(1000) < 1000
    assert fdlimit.spare_descriptors() == 0


def test_a_memory_group_still_charged_is_tried_again_without_its_settings_read(monkeypatch):
    """A memory group given back still charged (a tmpfs file its run left) is tried again later:
    its charge is read at each try, its settings (``lent.SETTINGS``, which must read as made)
    only once its charge is 0, when it would be lent, not at every try; it stays idle meanwhile."""
    import subprocess

    from processkit import rundir
    from processkit.containment import cgroup_v1, lent, pool

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    parent = cgroup_v1.own_groups()["memory"]
    left = f"/dev/shm/pk-pool-settings-test-{os.getpid()}"  # made here, removed below
    read: list[str] = []
    real_pread = os.pread

    def pread(fd, *args):
        read.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_pread(fd, *args)

    try:
        charged = lender.take(parent, ("memory",))
        fill = f"echo $$ > {charged.path}/tasks && head -c 4194304 /dev/zero > {left}"
        subprocess.run(["sh", "-c", fill], check=True)
        lender.give(charged)
        monkeypatch.setattr(os, "pread", pread)
        other = lender.take(parent, ("memory",))
        monkeypatch.setattr(os, "pread", real_pread)
        assert other is not charged and os.path.isdir(charged.path), "a group still charged waits, idle"
        assert f"{charged.path}/memory.max_usage_in_bytes" in read, "its charge was read"
        settings = {f"{charged.path}/{name}" for name in lent.SETTINGS["memory"]}
        assert not settings.intersection(read), "a group still charged had its settings read"
        lender.give(other)
    finally:
        monkeypatch.setattr(os, "pread", real_pread)
        if os.path.exists(left):
            os.unlink(left)
        lender.close()
        home.close()


def _c_heap() -> range:
    """The C heap's addresses (``[heap]`` in this process's maps: what ``malloc`` grows by ``brk``)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip().endswith("[heap]"):
                start, end = (int(end, 16) for end in line.split()[0].split("-"))
                return range(start, end)
    pytest.skip("this process has no [heap] mapping")


@pytest.mark.parametrize("controller", ["memory", "pids", "cgroup2"])
def test_a_lent_groups_settings_as_made_are_kept_out_of_the_c_heap(controller):
    """What a group's settings read when it was made is kept for the group's life: kept as the
    read returned it (a 64 KiB buffer shrunk in place, left where ``malloc`` put it) it pinned
    the C heap, and a batch's peak RSS grew with the groups its pool made (bench/README.md);
    each is a compact copy in the interpreter's own arenas, which a CPython object's address
    (``id``) shows."""
    from processkit import rundir
    from processkit.containment import cgroup_v1, cgroup_v2, pool

    parent = cgroup_v2.find_parent() if controller == "cgroup2" else cgroup_v1.own_groups()[controller]
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    try:
        group = lender.take(parent, pool.V2 if controller == "cgroup2" else (controller,))
        assert group.settings, "the group's settings were read as made"
        heap = _c_heap()
        if id(bytes(memoryview(b"a small object"))) in heap:
            pytest.skip("small objects come from the C heap here (PYTHONMALLOC=malloc)")
        pinned = [content for content in group.settings if id(content) in heap]
        assert not pinned, f"{len(pinned)} of {len(group.settings)} settings kept in the C heap"
        lender.give(group)
    finally:
        lender.close()
        home.close()


def test_a_memory_group_started_again_ahead_has_its_tasks_opened_once_and_is_joined_through_them(monkeypatch):
    """A v1 member list is read afresh only from a new open of ``tasks``: a memory group started
    again ahead of its run opens it once, when ``take`` lends it (to see it empty), and its
    run's child joins through that same fd."""
    import subprocess

    from processkit import rundir
    from processkit.containment import cgroup_v1, cgroupfs, pool

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    parent = cgroup_v1.own_groups()["memory"]
    opened: list[str] = []
    real_open_members = cgroupfs.open_members

    def open_members(path, *args, **kwargs):
        opened.append(path)
        return real_open_members(path, *args, **kwargs)

    try:
        group = lender.take(parent, ("memory",))
        lender.give(group)
        monkeypatch.setattr(cgroupfs, "open_members", open_members)
        lender.restart_ahead()
        again = lender.take(parent, ("memory",))
        monkeypatch.undo()
        assert again is group and again.reused
        assert opened == [group.path], f"its tasks opened {len(opened)} times for one lend"
        joined = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import os; os.write({again.join_fd}, b'0'); print(open('/proc/self/cgroup').read())",
            ],
            pass_fds=[again.join_fd],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        memory_line = next(line for line in joined.splitlines() if ":memory:" in line)
        assert memory_line.endswith("/" + os.path.basename(group.path)), joined
        lender.give(again)
    finally:
        monkeypatch.undo()
        lender.close()
        home.close()


def test_jobs_in_flight_with_lent_groups_fit_the_open_file_limit_they_were_let_in_by(tmp_path):
    """Under ``ulimit -n 1024`` a batch lets in as many jobs at once as ``fdlimit`` counts room
    for; each holds its lent groups' files (their join fds and what is read of them, the as-made
    settings among them) besides its own, so a count short of them had jobs fail to spawn
    (EMFILE) once that many were in flight beside the idle groups' files. Every job runs."""
    import resource

    jobs = [{"args": ["sleep", "0.5"], "id": f"j{n}"} for n in range(60)]  # two waves: the pool idle between
    out = tmp_path / "out"

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    proc = run_cli("batch", manifest, "--out", out, "--jobs", "30", "--keep", "failed", preexec_fn=limit)
    failed = [line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines()) if line["exit_code"]]
    assert proc.returncode == 0 and not failed, proc.stderr[-2000:]


@pytest.mark.parametrize("controller", ["memory", "pids", "cpuacct"])
def test_a_lent_v1_groups_link_count_is_read_from_a_held_fd_not_a_walk_from_its_parent(monkeypatch, controller):
    """A group's link count (a group below it) is read when it is given back and when it is
    started again, twice a lend: by ``fstat`` of a path fd its held files keep on it, not a
    ``stat`` through its parent; a group made below it is still seen (it is removed, not lent)."""
    from processkit import rundir
    from processkit.containment import cgroup_v1, pool

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home, idle_file_room=pool.IDLE_FILES)
    parent = cgroup_v1.own_groups()[controller]
    walked: list[str] = []
    real_stat = os.stat
    try:
        group = lender.take(parent, (controller,))
        name = os.path.basename(group.path)
        monkeypatch.setattr(os, "stat", lambda path, *a, **k: walked.append(str(path)) or real_stat(path, *a, **k))
        lender.give(group)
        lender.restart_ahead()
        again = lender.take(parent, (controller,))
        assert again is group
        lender.give(again)
        monkeypatch.undo()
        assert not [path for path in walked if name in path], walked
        os.mkdir(os.path.join(group.path, "below"))
        other = lender.take(parent, (controller,))
        assert other is not group, "a group with a group below it was lent"
        lender.give(other)
    finally:
        monkeypatch.undo()
        below = os.path.join(group.path, "below")
        if os.path.isdir(below):
            os.rmdir(below)
        lender.close()
        home.close()


def test_a_lent_v2_group_is_found_empty_and_unfrozen_by_its_events_then_its_freeze(monkeypatch):
    """A v2 group's members and its freeze are read once a lend, from its ``cgroup.events``
    (``populated 0``, ``frozen 0``) and then its ``cgroup.freeze``, whether it was started again
    when taken or ahead of it: ``cgroup.procs`` is not read. A group frozen while idle is still
    not lent (an empty group reads ``frozen 1`` once its freeze is 1), nor one whose events are
    read in the gap a job's last task leaves when it exits with the freeze on: the kernel clears
    ``populated`` before it sets ``frozen``, so that read says ``populated 0``, ``frozen 0``
    (made here as the gap shows it, the group's freeze really on); the freeze asked for, read
    after it, keeps the group from being lent."""
    from processkit import rundir
    from processkit.containment import cgroup_v2, pool

    parent = cgroup_v2.find_parent()
    if parent is None:
        pytest.skip("no cgroup v2 parent group here")
    read: list[str] = []
    real_pread = os.pread

    def pread(fd, *args):
        read.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        return real_pread(fd, *args)

    def in_the_gap(fd, *args):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == "cgroup.events":
            return b"populated 0\nfrozen 0\n"
        return real_pread(fd, *args)

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    try:
        group = lender.take(parent, pool.V2)
        for ahead in (False, True):
            lender.give(group)
            monkeypatch.setattr(os, "pread", pread)
            if ahead:
                lender.restart_ahead()
            again = lender.take(parent, pool.V2)
            monkeypatch.setattr(os, "pread", real_pread)
            assert again is group and again.reused
            assert read.count("cgroup.events") == 1 and read.count("cgroup.freeze") == 1, read
            assert read.index("cgroup.events") < read.index("cgroup.freeze"), read
            assert "cgroup.procs" not in read, read
            read.clear()
        for ahead, gap in ((False, False), (True, False), (False, True), (True, True)):
            lender.give(group)
            with open(os.path.join(group.path, "cgroup.freeze"), "w") as freeze:
                freeze.write("1")
            if gap:
                monkeypatch.setattr(os, "pread", in_the_gap)
            if ahead:
                lender.restart_ahead()
            taken = lender.take(parent, pool.V2)
            monkeypatch.setattr(os, "pread", real_pread)
            assert taken is not group and not os.path.exists(group.path), f"a frozen group was lent (gap: {gap})"
            group = taken
        lender.give(group)
    finally:
        monkeypatch.setattr(os, "pread", real_pread)
        lender.close()
        home.close()


@pytest.mark.parametrize("controller", ["pids", "memory", "cpuacct"])
def test_a_group_given_back_to_settle_later_is_looked_at_before_anything_is_lent(controller):
    """A pool told to settle later (the API's service, which starts its idle groups again after
    each reply) only takes a given-back group in at ``give``, the run's release its caller
    waits through; the next ``restart_ahead`` or ``take`` looks at it first, so a group a run
    made a group below is removed, never lent, and one a process joined is not lent either."""
    import subprocess

    from processkit import rundir
    from processkit.containment import cgroup_v1, pool

    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    lender.settle_later()
    parent = cgroup_v1.own_groups()[controller]
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        group = lender.take(parent, (controller,))
        lender.give(group)
        assert lender.take(parent, (controller,)) is group, "an empty group given back was not lent again"
        os.mkdir(os.path.join(group.path, "below"))
        lender.give(group)
        assert os.path.isdir(os.path.join(group.path, "below")), "given back: looked at only later"
        lender.restart_ahead()
        assert not os.path.exists(group.path), "a group with a group below it was kept"
        other = lender.take(parent, (controller,))
        lender.give(other)
        not_lent_once_joined(lender, parent, controller, other, sleeper.pid)  # joined before it is looked at
    finally:
        sleeper.kill()
        sleeper.wait()
        lender.close()
        home.close()
