"""Nothing outlives a dead runner: after ``prune`` the tree, the groups, the run directory and
the registry entry of a SIGKILLed runner are gone, and live runs beside it (one in another pid
namespace too) are untouched. Every CLI process here sees a /tmp of the test's own
(``own_tmp``): another same-user run sweeping the host's /tmp meanwhile would reap the dead
runner's directory before this test's prune could show it does."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from processkit.events.validate import validate_event

import conftest
from conftest import (
    SAFETY_NET,
    UNTIL_RELEASED,
    pid_alive,
    read_events_tolerant,
    registry_entries,
    run_cli,
    start_cli,
    wait_for_event,
    wait_for_file,
)
from own_tmp import OwnTmp, own_tmp  # noqa: F401
from run_groups import groups_of
from streams import require_mechanism, wait_until

PY = sys.executable

# The root child starts a grandchild that ignores SIGTERM and SIGHUP (and, where the container
# can hold it, leaves for its own session), then writes output until it is stopped.
TREE = """
import os, signal, sys, time
pidfile, leave_session = sys.argv[1], sys.argv[2] == "1"
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if leave_session:
        os.setsid()
    with open(pidfile + ".tmp", "w") as handle:
        handle.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    while True:
        time.sleep(1)
while True:
    print("line " * 20, flush=True)
    time.sleep(0.005)
"""

# A runner that SIGKILLs itself once it is published: group, run directory, socket and
# registry entry exist; the child does not.
KILLED_BEFORE_SPAWN = """
import os, signal, sys
from processkit.engine import launch

published = launch._publish

def publish(*args):
    publication = published(*args)
    os.kill(os.getpid(), signal.SIGKILL)

launch._publish = publish
from processkit.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.fixture(autouse=True)
def tmp(own_tmp) -> OwnTmp:
    return own_tmp


def run_dirs_of(tmp: OwnTmp, runner_pid: int) -> list[str]:
    """The runner's directories, named as the CLI names them (/tmp/pkc-...)."""
    return tmp.run_dirs(f"pkc-{runner_pid}-*")


def start_live_run(tmp_path, name: str, release, *prefix):
    jsonl = tmp_path / f"{name}.jsonl"
    command = [
        *prefix,
        *conftest.cli_command(),
        "run",
        "--jsonl",
        str(jsonl),
        "--run-id",
        name,
        "--",
        PY,
        "-c",
        UNTIL_RELEASED,
        str(release),
    ]
    runner = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return runner, wait_for_event(jsonl, "run_started"), jsonl


def finish_live_run(runner, jsonl, release) -> None:
    release.write_text("")
    _, stderr = runner.communicate(timeout=SAFETY_NET)
    assert runner.returncode == 0, stderr
    final = read_events_tolerant(jsonl)[-1]
    assert (final["event"], final["source"], final["code"]) == ("runner_exit", "child_exit", 0)


@pytest.mark.parametrize("moment", ["before_spawn", "during_output", "during_teardown"])
def test_prune_ends_everything_a_sigkilled_runner_left(tmp, tmp_path, isolated_registry, containment, moment):
    leave_session = containment == "cgroup_v2"  # a process group cannot hold a setsid escapee (documented)
    jsonl, pidfile, release = tmp_path / "victim.jsonl", tmp_path / "grandchild.pid", tmp_path / "release"
    live, live_started, live_jsonl = start_live_run(tmp_path, "beside", release)
    require_mechanism(read_events_tolerant(live_jsonl), containment)
    child = [PY, "-c", TREE, str(pidfile), "1" if leave_session else "0"]
    args = ["run", "--jsonl", str(jsonl), "--capture-dir", str(tmp_path / "cap"), "--grace", "30s", "--", *child]
    if moment == "before_spawn":
        victim = subprocess.Popen(
            [*tmp.prefix, PY, "-c", KILLED_BEFORE_SPAWN, *args], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        victim.wait(timeout=SAFETY_NET)
        assert victim.returncode == -signal.SIGKILL
        grandchild = None
    else:
        victim = start_cli(*args, stdout=subprocess.DEVNULL)
        wait_for_file(pidfile)
        grandchild = int(pidfile.read_text())
        wait_for_event(jsonl, "members_snapshot")
        if moment == "during_teardown":
            victim.send_signal(signal.SIGTERM)
            wait_for_event(jsonl, "cleanup_started")
        victim.kill()
        victim.communicate(timeout=SAFETY_NET)
    assert all(not validate_event(event) for event in read_events_tolerant(jsonl)), (
        "a complete line is not a valid event"
    )
    left = run_dirs_of(tmp, victim.pid)
    assert left, "the dead runner left no run directory to reap: the test shows nothing"
    if containment == "cgroup_v2":
        assert groups_of(victim.pid)

    proc = run_cli("prune", "--json", "--report-reaped")
    assert proc.returncode == 0, proc.stderr
    tally = json.loads(proc.stdout)
    assert (tally["pruned"], tally["live"]) == (1, 1)
    assert set(left) <= set(tally["reaped"]["run_dirs"])
    if grandchild is not None:
        assert wait_until(lambda: not pid_alive(grandchild), 60), "the grandchild outlived prune"
    assert run_dirs_of(tmp, victim.pid) == [], "prune left the run directory"
    assert groups_of(victim.pid) == [], "prune left the run's cgroup"
    assert len(registry_entries(isolated_registry)) == 2, "only the live run's entry stays"

    assert pid_alive(live_started["root_pid"]), "prune touched a live run"
    finish_live_run(live, live_jsonl, release)


def test_prune_dry_run_ends_nothing(tmp, tmp_path, containment):
    pidfile, jsonl = tmp_path / "grandchild.pid", tmp_path / "victim.jsonl"
    victim = start_cli("run", "--jsonl", jsonl, "--", PY, "-c", TREE, pidfile, "0", stdout=subprocess.DEVNULL)
    wait_for_file(pidfile)
    grandchild = int(pidfile.read_text())
    events = read_events_tolerant(jsonl)
    require_mechanism(events, containment)
    victim.kill()
    victim.communicate(timeout=SAFETY_NET)
    root = next(event["root_pid"] for event in events if event["event"] == "run_started")
    assert wait_until(lambda: not pid_alive(root), 60), "the root outlived its runner's death signal"
    try:
        dry = run_cli("prune", "--dry-run", "--json", "--report-reaped")
        reaped = json.loads(dry.stdout)["reaped"]
        # the grandchild alone, once, though it sits in a group of each hierarchy the run had
        assert reaped["run_dirs"] == run_dirs_of(tmp, victim.pid) and reaped["processes"] == 1, reaped
        human = run_cli("prune", "--dry-run").stdout.decode()
        assert f"would remove run directory {run_dirs_of(tmp, victim.pid)[0]}" in human
        assert pid_alive(grandchild) and run_dirs_of(tmp, victim.pid)
        plain = json.loads(run_cli("prune", "--json").stdout)
        assert set(plain) == {"pruned", "live", "unprobed", "orphaned_locks"}, (
            "prune --json keeps the reference's shape"
        )
        assert wait_until(lambda: not pid_alive(grandchild), 60)
    finally:
        if pid_alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_a_live_runner_in_another_pid_namespace_is_untouched(tmp, tmp_path, containment):
    """Its runner is invisible in this /proc, and its registry entry is not in this registry:
    only its lock, seen through the shared /tmp, says it lives."""
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"]).returncode != 0
    ):
        pytest.skip("cannot make a pid namespace here")
    release = tmp_path / "release"
    other_registry = tmp_path / "other-registry"
    env = dict(os.environ, PROCESSKIT_CLI_REGISTRY_DIR=str(other_registry))
    jsonl = tmp_path / "hidden.jsonl"
    command = [
        "unshare",
        "--pid",
        "--fork",
        "--mount-proc",
        *conftest.cli_command(),
        "run",
        "--jsonl",
        str(jsonl),
        "--",
        PY,
        "-c",
        UNTIL_RELEASED,
        str(release),
    ]
    runner = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    wait_for_event(jsonl, "run_started")
    require_mechanism(read_events_tolerant(jsonl), containment)
    (record,) = [json.loads(path.read_text()) for path in other_registry.glob("*.json")]
    hidden = os.path.dirname(record["endpoint"])
    token = os.path.basename(hidden)[len("pkc-") :]
    group = glob.glob(f"/sys/fs/cgroup/**/processkit-run-{token}", recursive=True)
    v2_groups = [path for path in group if os.path.exists(os.path.join(path, "cgroup.events"))]
    assert (len(v2_groups) == 1) == (containment == "cgroup_v2")  # the rest: v1 accounting groups

    for args in (("--dry-run", "--json", "--report-reaped"), ("--json", "--report-reaped")):
        reaped = json.loads(run_cli("prune", *args).stdout)["reaped"]
        assert hidden not in reaped["run_dirs"] and not set(group) & set(reaped["groups"])
        # its lock's holder, the runner seen under another pid here, is no sweep to wait for
        assert not [item for item in reaped["left"] if token in item["what"]], reaped["left"]
    assert os.path.isdir(tmp.outside(hidden)) and all(os.path.isdir(path) for path in group)
    finish_live_run(runner, jsonl, release)


def test_prune_ends_a_setsid_escapee_through_the_runs_cgroup_v1_cap_groups(tmp, tmp_path, monkeypatch):
    """Under a process group a setsid escapee is out of the group's reach, but not out of the v1
    groups its run made for a cap: prune kills their members and removes them."""
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    pidfile, jsonl = tmp_path / "grandchild.pid", tmp_path / "victim.jsonl"
    victim = start_cli(
        "run", "--jsonl", jsonl, "--max-processes", "64", "--", PY, "-c", TREE, pidfile, "1", stdout=subprocess.DEVNULL
    )
    # The grandchild's pid file, or the run's end: a run refused its cap (no cgroup v1 pids
    # controller) ends at once; a slow start on a loaded host is no reason to skip.
    wait_until(lambda: pidfile.exists() or victim.poll() is not None, what="the escapee's pid file or the run's end")
    if not pidfile.exists():
        victim.kill()
        victim.communicate(timeout=SAFETY_NET)
        pytest.skip(f"no cgroup v1 pids controller for a capped run here: {read_events_tolerant(jsonl)[-1:]}")
    grandchild = int(pidfile.read_text())
    victim.kill()
    victim.communicate(timeout=SAFETY_NET)
    groups = groups_of(victim.pid)
    assert groups and pid_alive(grandchild)
    reaped = json.loads(run_cli("prune", "--json", "--report-reaped").stdout)["reaped"]
    assert set(groups) <= set(reaped["groups"])
    assert wait_until(lambda: not pid_alive(grandchild), 60), "the escapee outlived prune"
    assert groups_of(victim.pid) == [] and run_dirs_of(tmp, victim.pid) == []


def plant_dead_run(tmp: OwnTmp, identity: str) -> str:
    """A run directory whose runner is dead (nobody holds its lock) and which names a process
    group, as a process-group runner would have left it; named as the CLI sees it."""
    path = f"/tmp/pkc-{os.getpid()}-{os.urandom(6).hex()}-0"
    here = tmp.outside(path)
    os.mkdir(here, 0o700)
    open(os.path.join(here, "live.lock"), "w").close()
    with open(os.path.join(here, "pgroup"), "w") as handle:
        handle.write(identity)
    return path


def start_time_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[19])


def test_a_process_group_whose_id_was_handed_on_is_not_signalled(tmp, tmp_path):
    """The recorded leader's pid now belongs to a process with another start time: the run's
    group ended long ago, and the group under that id now is someone else's."""
    stranger = subprocess.Popen(["sleep", "60"], process_group=0)
    path = plant_dead_run(tmp, f"{stranger.pid} {start_time_of(stranger.pid) - 1} {os.getsid(0)}\n")
    try:
        reaped = json.loads(run_cli("prune", "--json", "--report-reaped").stdout)["reaped"]
        assert stranger.poll() is None, "prune signalled a group that is not the run's"
        assert stranger.pid not in reaped["process_groups"]
        assert path in reaped["run_dirs"] and not os.path.exists(tmp.outside(path))
    finally:
        stranger.kill()
        stranger.wait()
        shutil.rmtree(tmp.outside(path), ignore_errors=True)


def test_a_leaderless_group_that_cannot_be_shown_to_be_the_runs_is_left_and_reported(tmp, tmp_path):
    """The leader is gone and a member lives in another session than the recorded one: it may
    be a later group under the same id, so it is left, and so is the run directory."""
    pidfile = tmp_path / "member.pid"
    leader = subprocess.Popen(
        ["sh", "-c", f'sleep 60 & echo $! > "{pidfile}.tmp" && mv "{pidfile}.tmp" "{pidfile}"'], start_new_session=True
    )
    leader.wait()
    wait_for_file(pidfile)
    member = int(pidfile.read_text())
    path = plant_dead_run(tmp, f"{leader.pid} 0 {os.getsid(0)}\n")  # our session, not the group's
    try:
        proc = run_cli("prune", "--json", "--report-reaped")
        reaped = json.loads(proc.stdout)["reaped"]
        assert pid_alive(member), "prune signalled a group it could not show to be the run's"
        assert {"what": f"process group {leader.pid}", "reason": "cannot show it is the run's group"} in reaped["left"]
        assert os.path.isdir(tmp.outside(path)), "the evidence went before what it speaks for"
        assert f"left process group {leader.pid}: cannot show it is the run's group" in run_cli("prune").stdout.decode()
    finally:
        os.kill(member, signal.SIGKILL)
        shutil.rmtree(tmp.outside(path), ignore_errors=True)


def test_what_no_lock_speaks_for_is_left_and_reported(tmp, tmp_path, monkeypatch):
    """A run directory with no lock file (an older version's) and a run group whose directory is
    gone (its runner's /tmp is not this one): neither is taken as dead."""
    parent = tmp_path / "cgroups"  # a plain directory stands in for the cgroup parent
    parent.mkdir()
    monkeypatch.setenv("PROCESSKIT_CGROUP_PARENT", str(parent))
    token = f"{os.getpid()}-{os.urandom(6).hex()}-1"
    orphan_group = parent / f"processkit-run-{token}"
    orphan_group.mkdir()
    unlocked = f"/tmp/pkc-{os.getpid()}-{os.urandom(6).hex()}-2"
    os.mkdir(tmp.outside(unlocked), 0o700)
    os.utime(tmp.outside(unlocked), (1, 1))  # old enough not to be one a runner is making
    try:
        for args in (("--dry-run",), ()):
            proc = run_cli("prune", "--json", "--report-reaped", *args)
            left = json.loads(proc.stdout)["reaped"]["left"]
            assert {"what": str(orphan_group), "reason": "no private run directory speaks for it"} in left
            assert {"what": unlocked, "reason": "no liveness lock speaks for it"} in left
        assert orphan_group.is_dir() and os.path.isdir(tmp.outside(unlocked))
        assert f"left {unlocked}: no liveness lock speaks for it" in run_cli("prune").stdout.decode()
    finally:
        os.rmdir(tmp.outside(unlocked))


def test_a_dead_run_another_registry_holds_is_reaped_too(tmp, tmp_path, containment):
    """No entry in this registry is no evidence either way: the run's own lock decides."""
    pidfile, jsonl = tmp_path / "grandchild.pid", tmp_path / "victim.jsonl"
    env = dict(os.environ, PROCESSKIT_CLI_REGISTRY_DIR=str(tmp_path / "elsewhere"))
    victim = start_cli("run", "--jsonl", jsonl, "--", PY, "-c", TREE, pidfile, "0", stdout=subprocess.DEVNULL, env=env)
    wait_for_file(pidfile)
    require_mechanism(read_events_tolerant(jsonl), containment)
    grandchild = int(pidfile.read_text())
    victim.kill()
    victim.communicate(timeout=SAFETY_NET)
    left = run_dirs_of(tmp, victim.pid)
    tally = json.loads(run_cli("prune", "--json", "--report-reaped").stdout)
    assert tally["pruned"] == 0 and left and set(left) <= set(tally["reaped"]["run_dirs"])
    assert wait_until(lambda: not pid_alive(grandchild), 60), "the grandchild outlived prune"
    assert run_dirs_of(tmp, victim.pid) == [] and groups_of(victim.pid) == []
