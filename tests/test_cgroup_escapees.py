"""A cgroup v2 run's process that writes its own pid into another group's ``cgroup.procs`` (root
may, as may the owner of a delegated subtree for a group within it) leaves the run's group, and
the kill of that group misses it. The runner is its runs' subreaper under cgroup v2 too, so such
a process comes back to it once its ancestors in the group are dead: ``run`` lists it in
``cleanup_finished``'s ``remaining_pids`` (the teardown is not confirmed clean), ends it and says
so on stderr; ``batch`` and ``bench`` end and say theirs after their runs. The exit status is
the child's still. Each escapee is checked by a pidfd opened while it ran, not by its pid."""

from __future__ import annotations

import datetime
import json
import os
import re
import select
import shutil
import signal
import subprocess
import time

import pytest

from conftest import SAFETY_NET, cli_command, read_events, start_cli
from processkit.containment.cgroup_v1 import own_groups as own_v1_groups
from processkit.containment.cgroup_v2 import own_group
from processkit.engine.tree_end import KILL_CONFIRM_SECONDS
from streams import PY, check_stream, one, require_mechanism
from test_run_escapees import LINGER
from test_zombie_leader import ON_A_THREAD, _main_thread_ended

# What a process that leaves does: moves itself into the group at argv[2] (a leaf the test made
# below the cgroup2 mount's root, not the runner's own group), writes its /proc/self/cgroup to
# argv[1] + ".cgroup", then lingers (its pid written to argv[1]); or writes the failure to
# argv[1] + ".failed" and exits.
LEAVE = (
    LINGER
    + r"""
where, procs = sys.argv[1], os.path.join(sys.argv[2], "cgroup.procs")

def move(pid):
    try:
        with open(procs, "w") as handle:
            handle.write(str(pid))
    except OSError as exc:
        with open(where + ".failed", "w") as handle:
            handle.write(str(exc))
        os._exit(1)

def leave():
    move(os.getpid())
    with open("/proc/self/cgroup") as mine, open(where + ".cgroup", "w") as handle:
        handle.write(mine.read())  # where it is now, for the test to read whatever ends it later
    linger(where)
"""
)

# The run's command: a background child leaves; the command exits once the test holds a pidfd on
# it (argv[1] + ".opened", ``_escapee``): the runner ends the escapee once the command has exited.
_FORKS_ONE_THAT_LEAVES = r"""
if os.fork() == 0:
    leave()
while not os.path.exists(where + ".opened") and not os.path.exists(where + ".failed"):
    time.sleep(0.01)
"""
GRANDCHILD_LEAVES = LEAVE + _FORKS_ONE_THAT_LEAVES

# The run's root itself leaves, and sleeps on.
ROOT_LEAVES = LEAVE + "leave()\n"

# The run's command: a background child leaves into a group it makes beside the run's, named as
# the runner names its runs' groups (``processkit-run-<runner pid>-``), argv[2] the cgroup2 mount;
# the group's path is written to argv[1] + ".group" for the test to remove.
_NAMED_AS_A_RUNS = r"""
mine = next(line[3:] for line in open("/proc/self/cgroup").read().splitlines() if line.startswith("0::"))
group = os.path.join(sys.argv[2], os.path.dirname(mine).lstrip("/"), f"processkit-run-{os.getppid()}-escape-test")
os.mkdir(group)
with open(where + ".group", "w") as handle:
    handle.write(group)
procs = os.path.join(group, "cgroup.procs")
"""
GRANDCHILD_LEAVES_INTO_A_RUNS_NAME = LEAVE + _NAMED_AS_A_RUNS + _FORKS_ONE_THAT_LEAVES

# The run's command: it moves its runner into the group at argv[2] first, then a background child
# leaves into that group as in GRANDCHILD_LEAVES.
RUNNER_MOVED_THEN_GRANDCHILD_LEAVES = LEAVE + "move(os.getppid())\n" + _FORKS_ONE_THAT_LEAVES

# What a process that leaves does on a thread: as LEAVE, but it lingers on a thread, its main
# thread ended alone (test_zombie_leader's ON_A_THREAD).
LEAVE_ON_A_THREAD = LEAVE + ON_A_THREAD

# The run's root itself leaves on a thread.
ROOT_LEAVES_ON_A_THREAD = LEAVE_ON_A_THREAD + "leave()\n"

# The run's command: a background child leaves on a thread; the command exits once the child's
# main thread has ended.
GRANDCHILD_LEAVES_ON_A_THREAD = (
    LEAVE_ON_A_THREAD
    + _FORKS_ONE_THAT_LEAVES
    + r"""
while os.path.exists(where) and not main_thread_ended(int(open(where).read())):
    time.sleep(0.01)
"""
)


@pytest.fixture
def cgroup_root():
    """A leaf group of the test's own below the cgroup2 mount's root (only root may move a
    process there), removed at the end: not the runner's own group, where what a run's
    escapee moves into is taken for the caller's (``leftovers.v2_keeps``)."""
    if os.geteuid() != 0:
        pytest.skip("moving a process into a group below the cgroup2 root needs root")
    mount, _ = own_group()
    if mount is None:
        pytest.skip("no cgroup2 mount on this host")
    group = os.path.join(mount, f"escape-test-{os.getpid()}")
    os.mkdir(group)
    yield group
    _remove_when_empty(group)  # the escapee, killed, leaves the group once it is collected


def _remove_when_empty(group: str) -> None:
    deadline = time.monotonic() + SAFETY_NET
    while True:
        try:
            os.rmdir(group)
            return
        except OSError:
            assert time.monotonic() < deadline, f"{group} stayed populated"
            time.sleep(0.01)


@pytest.fixture
def opened():
    """pidfds a test opened on the escapees it made: any process still alive is killed at the end."""
    fds: list[int] = []
    yield fds
    for fd in fds:
        if not _exited(fd):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        os.close(fd)


def _exited(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])


def _ended(pidfd: int) -> bool:
    """Whether the process ends within 30 s (a kill is not over when its sender returns)."""
    return bool(select.select([pidfd], [], [], 30)[0])


def _escapee(where, proc, opened: list[int]) -> int:
    """The escapee's pid, once it has left its group, and a pidfd on it, opened before the
    command that waits for ``.opened`` exits (skips where the move itself was refused: a host
    whose root group is out of this process's reach)."""
    deadline = time.monotonic() + SAFETY_NET
    while not os.path.exists(where) and not os.path.exists(f"{where}.failed"):
        assert time.monotonic() < deadline and proc.poll() is None, "the escapee never said it had moved"
        time.sleep(0.01)
    if os.path.exists(f"{where}.failed"):
        proc.communicate(timeout=60)
        pytest.skip(f"the move to the root cgroup was refused here: {open(f'{where}.failed').read()}")
    pid = int(open(where).read())
    opened.append(os.pidfd_open(pid))
    open(f"{where}.opened", "w").close()
    return pid


def _one_listed_and_ended(tmp_path, where: str, command: str, group: str, opened: list[int]) -> bytes:
    """Runs ``command`` (its escapee says itself at ``where``, moving into ``group``): the exit
    status is the child's (0), ``cleanup_finished`` lists the escapee alone, and it is dead when
    the CLI returns; the CLI's stderr."""
    events = tmp_path / "events.jsonl"
    proc = start_cli("run", "--jsonl", events, "--", PY, "-c", command, where, group)
    pid = _escapee(where, proc, opened)
    _, err = proc.communicate(timeout=60)
    found = read_events(events)
    require_mechanism(found, "cgroup_v2")
    check_stream(events, proc.returncode)
    assert proc.returncode == one(found, "runner_exit")["code"] == 0, err
    finished = one(found, "cleanup_finished")
    assert finished["remaining_pids"] == [pid] and finished["remaining"] == 1, finished
    assert _ended(opened[0]), "the process of the run outside its group outlived the run"
    return err


@pytest.mark.parametrize("on_a_thread", [False, True], ids=["lingers", "on_a_thread"])
def test_run_lists_ends_and_says_a_grandchild_that_left_its_cgroup(tmp_path, cgroup_root, opened, on_a_thread):
    """The grandchild outlives the kill of the run's group: ``cleanup_finished`` lists it (the
    teardown is not confirmed clean), it is dead when the CLI returns, stderr says so, and the
    exit status is the child's own (0). So too when it ended its main thread alone before the
    root exited: its leader reads as a zombie, but it runs on (it was ended silently)."""
    command = GRANDCHILD_LEAVES_ON_A_THREAD if on_a_thread else GRANDCHILD_LEAVES
    err = _one_listed_and_ended(tmp_path, str(tmp_path / "escapee"), command, cgroup_root, opened)
    said = [line for line in err.decode().splitlines() if "had left its cgroup" in line]
    assert len(said) == 1 and said[0].startswith("processkit-cli: warning: 1 process(es)"), err


# The look for escapees after the kill fails (as a runner short of descriptors would).
LOOK_FAILS = (
    "processkit.containment.leftovers",
    "end_descendants",
    "lambda **_: (_ for _ in ()).throw(OSError(24, 'Too many open files'))",
)


def test_a_failed_look_for_escapees_names_its_own_error(tmp_path, cgroup_root, opened):
    """The teardown's read after the kill went well, its look for escapees failed: no clean
    teardown is claimed, and the warning names the look's error (the kill's read has none)."""
    events, where = tmp_path / "events.jsonl", str(tmp_path / "escapee")
    argv = ["run", "--jsonl", events, "--", PY, "-c", GRANDCHILD_LEAVES, where, cgroup_root]
    proc = start_cli(*argv, patched=LOOK_FAILS)
    _escapee(where, proc, opened)
    _, err = proc.communicate(timeout=60)
    found = read_events(events)
    require_mechanism(found, "cgroup_v2")
    finished = one(found, "cleanup_finished")
    assert finished["read_error"] is True and finished["remaining"] == 0, finished
    said = (
        b"processkit-cli: warning: could not count the container's members after the kill: "
        b"Too many open files (os error 24); the teardown is not confirmed clean\n"
    )
    assert said in err, err


def test_run_lists_ends_and_says_a_root_that_left_its_cgroup(tmp_path, cgroup_root, opened):
    """The run's root itself moves out and keeps running until the timeout: the kill of its group
    misses it, so it is killed by its pid, listed as remaining and said; the exit is the
    timeout's (106). It is killed once the group's kill is confirmed, not after the wait for a
    root on its way out (``KILL_CONFIRM_SECONDS``: a ``--timeout 1s`` run ended at 3 s)."""
    events, where = tmp_path / "events.jsonl", str(tmp_path / "escapee")
    argv = ["run", "--timeout", "1s", "--jsonl", events, "--", PY, "-c", ROOT_LEAVES, where, cgroup_root]
    proc = start_cli(*argv)
    pid = _escapee(where, proc, opened)
    _, err = proc.communicate(timeout=60)
    found = read_events(events)
    require_mechanism(found, "cgroup_v2")
    check_stream(events, proc.returncode)
    assert one(found, "run_started")["root_pid"] == pid
    assert proc.returncode == one(found, "runner_exit")["code"] == 106, err
    assert one(found, "cleanup_finished")["remaining_pids"] == [pid], one(found, "cleanup_finished")
    assert _exited(opened[0]), "the root that left the run's cgroup outlived the run"
    assert f"the run's root process (pid {pid}) outlived the kill of its containment".encode() in err, err
    took = _at(one(found, "cleanup_finished")) - _at(one(found, "cleanup_started"))
    assert took < KILL_CONFIRM_SECONDS, f"the teardown waited {took:.3f} s for a root that had left"


def _at(event: dict) -> float:
    return datetime.datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


def _batch_or_bench_says(tmp_path, command: str, script: str, where: str, group: str, opened: list[int]) -> None:
    """Runs ``script`` (its escapee says itself at ``where``, moving into ``group``) as a batch's
    one job or a bench's one run: the escapee is dead when the CLI returns, and said."""
    path = tmp_path / "leaves.py"
    path.write_text(script)
    run_argv = [PY, str(path), where, group]
    if command == "batch":
        manifest = tmp_path / "manifest.jsonl"
        manifest.write_text(json.dumps({"id": "leaves", "args": run_argv}) + "\n")
        proc = start_cli("batch", manifest, "--out", tmp_path / "out")
        events = tmp_path / "out" / "leaves" / "events.jsonl"
        said = "1 process(es) of this batch's jobs had left their job's process group or cgroup"
    else:
        # -N: no shell between bench and the run's root, whose parent the script names a group for
        proc = start_cli(
            "bench", "-N", "--runs", "1", "--warmup", "0", "--jsonl-dir", tmp_path / "s", " ".join(run_argv)
        )
        events = None
        said = "left 1 process outside their process group or cgroup"
    pid = _escapee(where, proc, opened)
    out, err = proc.communicate(timeout=120)
    if events is not None:
        require_mechanism(read_events(events), "cgroup_v2")
    assert proc.returncode == 0, err
    assert _exited(opened[0]), f"the process that left its cgroup outlived the {command}"
    assert said in (out + err).decode(), (out, err)
    if command == "batch":  # named: no job's stream can list it, so a CI log needs what it was
        assert re.search(rf"killed now \(pid {pid} python[\w.]*\)$", err.decode(), re.M), err


@pytest.mark.parametrize("command", ["batch", "bench"])
def test_batch_and_bench_end_and_say_a_process_that_left_its_cgroup(tmp_path, cgroup_root, opened, command):
    """A job's (a bench run's) escapee is ended after the runs and said; jobs run side by side,
    so no job's stream can name it."""
    _batch_or_bench_says(tmp_path, command, GRANDCHILD_LEAVES, str(tmp_path / "escapee"), cgroup_root, opened)


# The run's command: a child moves itself into the v1 freezer group at argv[2] (its v2 group stays
# the run's), with argv[3] becomes another user (as ``sudo -b`` does), and sleeps on, its pid
# written to argv[1] by the command once it is there; the command exits once argv[1] + ".go" appears.
FROZEN_MEMBER = r"""
import os, sys, time
where, freezer, nobody = sys.argv[1], sys.argv[2], len(sys.argv) > 3
read, write = os.pipe()
child = os.fork()
if child == 0:
    with open(os.path.join(freezer, "cgroup.procs"), "w") as handle:
        handle.write(str(os.getpid()))
    if nobody:
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.write(write, b".")
    time.sleep(60)
    os._exit(0)
os.read(read, 1)
with open(where + ".tmp", "w") as handle:
    handle.write(str(child))
os.replace(where + ".tmp", where)
while not os.path.exists(where + ".go"):
    time.sleep(0.01)
"""


def v1_group(controller: str, name: str) -> str:
    """A v1 group of the test's own in ``controller``'s hierarchy, made now (a skip where it
    cannot be made): the caller removes it."""
    group = f"/sys/fs/cgroup/{controller}/{name}-{os.getpid()}"
    try:
        os.mkdir(group)
    except OSError as exc:
        pytest.skip(f"no v1 {controller} group this test may make: {exc}")
    return group


@pytest.fixture
def freezer():
    """A v1 freezer group of the test's own (a frozen task cannot die of SIGKILL until thawed),
    thawed and removed at the end."""
    group = v1_group("freezer", "frozen-test")
    yield group
    with open(os.path.join(group, "freezer.state"), "w") as handle:
        handle.write("THAWED")
    _remove_when_empty(group)


@pytest.mark.parametrize("another_user", [False, True], ids=["member", "another_users"])
def test_a_member_that_cannot_die_in_time_is_listed_once_never_said_as_left(tmp_path, freezer, opened, another_user):
    """A member still in the run's group that the kill cannot end yet (frozen; D state alike):
    ``remaining_pids`` lists it, as the normal path does, and no warning says it left its cgroup
    (it never did), nor does the sweep kill it again round after round. So too for one that
    became another user, whose kill by its pid a runner without CAP_KILL is refused (it was
    said to have left its cgroup and to belong to another user now)."""
    if another_user and shutil.which("setpriv") is None:
        pytest.skip("needs setpriv")
    events, where = tmp_path / "events.jsonl", str(tmp_path / "member")
    argv = ["run", "--jsonl", str(events), "--", PY, "-c", FROZEN_MEMBER, where, freezer] + ["nobody"] * another_user
    without_kill = ["setpriv", "--bounding-set", "-kill", "--inh-caps", "-kill", "--"] * another_user
    proc = subprocess.Popen(
        without_kill + cli_command() + argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    pid = _escapee(where, proc, opened)
    with open(os.path.join(freezer, "freezer.state"), "w") as handle:
        handle.write("FROZEN")
    deadline = time.monotonic() + SAFETY_NET
    while open(os.path.join(freezer, "freezer.state")).read().strip() != "FROZEN":
        assert time.monotonic() < deadline, "the member never froze"
        time.sleep(0.01)
    group = next(line[3:] for line in open(f"/proc/{pid}/cgroup").read().splitlines() if line.startswith("0::"))
    open(where + ".go", "w").close()
    _, err = proc.communicate(timeout=60)
    found = read_events(events)
    require_mechanism(found, "cgroup_v2")
    assert proc.returncode == 0, err
    assert one(found, "cleanup_finished")["remaining_pids"] == [pid], one(found, "cleanup_finished")
    assert b"had left" not in err and b"another user" not in err, err
    with open(os.path.join(freezer, "freezer.state"), "w") as handle:
        handle.write("THAWED")  # its pending SIGKILL ends it now
    while not _exited(opened[0]):
        assert time.monotonic() < deadline + 60, "the thawed member outlived its kill"
        time.sleep(0.01)
    mount, _ = own_group()
    left = os.path.join(mount or "/", group.lstrip("/"))
    if os.path.isdir(left):  # the run's group, populated when the runner left: removed here
        os.rmdir(left)


def test_a_root_that_left_its_cgroup_and_ended_its_main_thread_alone_is_killed_and_listed(
    tmp_path, cgroup_root, opened
):
    """Its leader reads as a zombie in ``/proc/<pid>/stat``, but a thread of it runs on: it is no
    dead root. The kill of its group misses it, so it is killed by its pid and listed as any
    root that left is (it was taken for dead, left out of ``remaining_pids`` and left running)."""
    events, where = tmp_path / "events.jsonl", str(tmp_path / "escapee")
    proc = start_cli("run", "--jsonl", events, "--", PY, "-c", ROOT_LEAVES_ON_A_THREAD, where, cgroup_root)
    pid = _escapee(where, proc, opened)
    deadline = time.monotonic() + SAFETY_NET
    while not _main_thread_ended(pid):
        assert time.monotonic() < deadline, "the root's main thread never ended"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    found = read_events(events)
    require_mechanism(found, "cgroup_v2")
    assert proc.returncode == one(found, "runner_exit")["code"], err
    assert one(found, "cleanup_finished")["remaining_pids"] == [pid], one(found, "cleanup_finished")
    assert _ended(opened[0]), "the root that left the run's cgroup outlived the run"
    assert f"the run's root process (pid {pid}) outlived the kill of its containment".encode() in err, err


@pytest.mark.parametrize("path", ["direct", "engine"])
def test_bench_ends_and_says_a_root_that_left_its_cgroup(tmp_path, cgroup_root, opened, path):
    """A bench run's root moves out and runs on until the timeout: killed by its pid and said,
    on bench's direct sample path (benchmark/direct.py) as on the engine's (the suite's switch)."""
    where, script = str(tmp_path / "escapee"), tmp_path / "leaves.py"
    script.write_text(ROOT_LEAVES)
    env = dict(os.environ, PROCESSKIT_BENCH_PATH=path)
    command = f"{PY} {script} {where} {cgroup_root}"
    proc = start_cli("bench", "-N", "--runs", "1", "--style", "none", "--timeout", "1s", command, env=env)
    pid = _escapee(where, proc, opened)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 118 and b"timed out" in err, err
    assert _exited(opened[0]), "the root that left the run's cgroup outlived the sample"
    assert f"the run's root process (pid {pid}) outlived the kill of its containment".encode() in err, err


@pytest.fixture
def beside_the_runs(tmp_path):
    """Where the escapee of ``GRANDCHILD_LEAVES_INTO_A_RUNS_NAME`` says itself; the group it made
    is removed at the end, once ``opened`` (set up after this) has killed what it holds."""
    if os.geteuid() != 0:
        pytest.skip("moving a process into a group below the cgroup2 root needs root")
    where = str(tmp_path / "escapee")
    yield where
    if os.path.exists(where + ".group"):
        _remove_when_empty(open(where + ".group").read())


@pytest.mark.parametrize("command", ["run", "batch", "bench"])
def test_a_process_that_moved_into_a_group_named_as_a_runs_is_ended_and_said(
    tmp_path, beside_the_runs, opened, command
):
    """A process of a run that makes a group beside the run's, named as the runner names its
    runs' groups, and moves there left its run's group as into any other: ended and said, and
    under ``run`` listed in ``remaining_pids``. It was spared and left out of
    ``remaining_pids`` while the stream said clean, then (run) killed but said by no warning,
    (batch, bench) killed unsaid and uncounted."""
    mount, _ = own_group()
    if mount is None:
        pytest.skip("no cgroup2 mount on this host")
    if command != "run":
        _batch_or_bench_says(tmp_path, command, GRANDCHILD_LEAVES_INTO_A_RUNS_NAME, beside_the_runs, mount, opened)
        return
    err = _one_listed_and_ended(tmp_path, beside_the_runs, GRANDCHILD_LEAVES_INTO_A_RUNS_NAME, mount, opened)
    assert b"1 process(es) of this run had left its cgroup" in err, err


def test_run_ends_and_lists_a_process_that_followed_its_runner_into_another_group(tmp_path, cgroup_root, opened):
    """A run's process (root) that moves the runner itself into another group and follows it
    there: the runner's own group, whose processes the sweep takes for the caller's, is where
    the runner was as its run began, not where the run put it, so the escapee is ended and
    listed (it was spared while the stream said clean)."""
    where = str(tmp_path / "escapee")
    err = _one_listed_and_ended(tmp_path, where, RUNNER_MOVED_THEN_GRANDCHILD_LEAVES, cgroup_root, opened)
    assert b"had left its cgroup" in err, err


def test_run_ends_and_lists_a_process_that_moved_into_its_runners_group_from_a_runs_v1_groups(tmp_path, opened):
    """A run's process (root) that moves itself into the runner's own v2 group, where the caller's
    processes are, but is still in its run's v1 accounting groups (a hybrid host's) is the run's:
    ended, listed and said (it was spared as the caller's while the stream said clean)."""
    if os.geteuid() != 0:
        pytest.skip("moving a process into the runner's cgroup needs root here")
    mount, own = own_group()
    if own is None:
        pytest.skip("no cgroup2 group of this process's to move into")
    events, where = tmp_path / "events.jsonl", str(tmp_path / "escapee")
    proc = start_cli("run", "--jsonl", events, "--", PY, "-c", GRANDCHILD_LEAVES, where, own)
    pid = _escapee(where, proc, opened)
    v1 = [line for line in open(f"{where}.cgroup").read().splitlines() if not line.startswith("0::")]
    _, err = proc.communicate(timeout=60)
    if not any("/processkit-run-" in line for line in v1):
        pytest.skip("a run here has no v1 accounting groups")
    finished = one(read_events(events), "cleanup_finished")
    assert finished["remaining_pids"] == [pid], finished
    assert _ended(opened[0]), "the process that moved into the runner's group outlived the run"
    assert b"had left its cgroup" in err, err


@pytest.mark.parametrize("command", ["batch", "bench"])
def test_batch_and_bench_end_and_say_a_process_that_moved_into_their_own_group_from_a_runs_v1_groups(
    tmp_path, opened, command
):
    """A job's (a bench run's) process (root) that moves itself into the batch's own v2 group,
    where the caller's processes are, while its run's v1 accounting groups (a hybrid host's)
    still hold it: the job's release moves it up out of those groups, into the batch's own, but
    it is the job's all the same: ended after the runs and said (under ``batch`` it outlived
    the batch, unsaid, as the caller's). The ``bench`` case is a regression guard, not a fix's
    test: its pool keeps a run's v1 groups for the next run, so its look found the process still
    in them before the release recorded what it moves up."""
    if os.geteuid() != 0:
        pytest.skip("moving a process into the runner's cgroup needs root here")
    _, own = own_group()
    if own is None:
        pytest.skip("no cgroup2 group of this process's to move into")
    if not own_v1_groups():
        pytest.skip("no v1 hierarchy here: a run has no v1 accounting groups")
    _batch_or_bench_says(tmp_path, command, GRANDCHILD_LEAVES, str(tmp_path / "escapee"), own, opened)


# The run's command: it moves its runner into the group at argv[2] first, then a background child
# leaves its process group (``setsid``) and moves into that group as in GRANDCHILD_LEAVES.
RUNNER_MOVED_THEN_DAEMON_LEAVES = (
    LEAVE
    + r"""
move(os.getppid())
if os.fork() == 0:
    os.setsid()
    leave()
while not os.path.exists(where + ".opened") and not os.path.exists(where + ".failed"):
    time.sleep(0.01)
"""
)


@pytest.fixture
def parent_refusing_groups():
    """A group of the test's own below the cgroup2 mount's root that refuses every group below
    it (``cgroup.max.descendants`` 0) until the test lets it have some; removed at the end."""
    mount, _ = own_group()
    if mount is None:
        pytest.skip("no cgroup2 mount on this host")
    group = os.path.join(mount, f"escape-parent-{os.getpid()}")
    os.mkdir(group)
    with open(os.path.join(group, "cgroup.max.descendants"), "w") as handle:
        handle.write("0")
    yield group
    _remove_when_empty(group)


def test_batch_ends_a_process_that_followed_its_runner_before_the_first_v2_group(
    tmp_path, cgroup_root, parent_refusing_groups, opened
):
    """A batch whose first job fell back to a process group (its v2 parent refused the group)
    and moved the batch process into another group, where its daemon followed: the batch's own
    group is the one it was in before its first job, so the daemon is a job's, ended and said
    once the jobs are over (the batch's group was taken at its first v2 group, a later job's:
    by then the one the daemon was in, so it outlived the batch as the caller's)."""
    where = str(tmp_path / "escapee")
    manifest = tmp_path / "manifest.jsonl"
    jobs = [("moves", [PY, "-c", RUNNER_MOVED_THEN_DAEMON_LEAVES, where, cgroup_root]), ("plain", [PY, "-c", "pass"])]
    manifest.write_text("".join(json.dumps({"id": name, "args": args}) + "\n" for name, args in jobs))
    env = dict(os.environ, PROCESSKIT_CGROUP_PARENT=parent_refusing_groups)
    proc = start_cli("batch", manifest, "--out", tmp_path / "out", "-j", "1", env=env)
    deadline = time.monotonic() + SAFETY_NET
    while not os.path.exists(where) and not os.path.exists(f"{where}.failed"):
        assert time.monotonic() < deadline and proc.poll() is None, "the escapee never said it had moved"
        time.sleep(0.01)
    with open(os.path.join(parent_refusing_groups, "cgroup.max.descendants"), "w") as handle:
        handle.write("max")  # the next job gets its v2 group
    _escapee(where, proc, opened)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    require_mechanism(read_events(tmp_path / "out" / "moves" / "events.jsonl"), "process_group")
    require_mechanism(read_events(tmp_path / "out" / "plain" / "events.jsonl"), "cgroup_v2")
    assert _ended(opened[0]), "the daemon that followed the batch process outlived the batch"
    assert "1 process(es) of this batch's jobs had left" in err.decode(), err
