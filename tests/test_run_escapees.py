"""What ``run`` and ``batch`` end after their runs (``containment/escaped.py``'s ``end_escapees``): only
what a run left outside its process group, never a process the runner had before its first run
(a shell's ``setsid sleep 30 & exec processkit-cli run ...``), and never by changing the exit
status ``runner_exit`` said, whatever the kill meets (an escapee that is another user's now)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import cli_command, pid_alive, read_events_tolerant, run_cli
from streams import PY, require_mechanism

# What each lingering process does: its standard streams off the caller's pipes (so they end with
# the caller), its pid written once it is where it is meant to be, then a minute's sleep.
LINGER = r"""
import os, sys, time

def linger(where):
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    with open(where + ".tmp", "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(where + ".tmp", where)
    time.sleep(60)
    os._exit(0)
"""

# A shell's background job handed to the runner across exec: a process in a session of its own,
# its pid written once it is there, then this process becomes the CLI (argv after the pid file).
HAND_OVER = (
    LINGER
    + r"""
where, argv = sys.argv[1], sys.argv[2:]
if os.fork() == 0:
    os.setsid()
    linger(where)
while not os.path.exists(where):
    time.sleep(0.01)
os.execv(argv[0], argv)
"""
)

# A run's child whose escapee leaves its group and becomes another user (as ``sudo -b`` does):
# the runner may no longer signal it. Its pid is written once it has changed its user.
BECOME_NOBODY = r"""
import os, sys
where = sys.argv[1]
read, write = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)
        os.write(write, str(os.getpid()).encode())
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(write)
        import time
        time.sleep(60)
    os._exit(0)
os.close(write)
pid = os.read(read, 32).decode()
with open(where, "w") as handle:
    handle.write(pid)
"""


# A run's child whose grandchild joins the runner's own process group (its parent's, which the
# kernel allows within one session): the kill of the run's group misses it. Its pid is written
# once it is there.
JOIN_THE_RUNNERS_GROUP = (
    LINGER
    + r"""
where, runners_group = sys.argv[1], os.getpgid(os.getppid())
if os.fork() == 0:
    os.setpgid(0, runners_group)
    linger(where)
while not os.path.exists(where):
    time.sleep(0.01)
"""
)

# A shell's background job handed to the runner across exec that orphans a child of its own once
# the run has started (``(sleep 1; cmd &) & exec processkit-cli run ...``): the orphan comes to
# the runner, its subreaper, outside the job's subtree. ``own_session``: the job leads a session
# of its own first; else it stays in the caller's group (which becomes the runner's). ``daemon``:
# the orphan leads a session of its own (``setsid -f``), outside every one the runner knew. The
# orphan writes its pid once it has been re-parented.
HAND_OVER_THEN_ORPHAN = (
    LINGER
    + r"""
where, mode, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
if os.fork() == 0:
    if mode == "own_session":
        os.setsid()
    while not os.path.exists(where + ".go"):
        time.sleep(0.01)
    job = os.getpid()
    if os.fork() == 0:
        if mode == "daemon":
            os.setsid()
        while os.getppid() == job:
            time.sleep(0.01)
        linger(where)
    os._exit(0)
os.execv(argv[0], argv)
"""
)

# The run's command: tells the caller's job to orphan its child, and waits until it has.
ORPHAN_NOW = r"""
import os, sys, time
open(sys.argv[1] + ".go", "w").close()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
"""


@pytest.fixture
def survivors():
    """Pids a test made; any still alive is killed when it ends."""
    found: list[int] = []
    yield found
    for pid in found:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("command", ["run", "batch", "bench"])
def test_a_process_the_runner_inherited_is_never_ended_nor_said(tmp_path, containment, command, survivors):
    """The runner's children from before its first run are the caller's: after the run they are
    alive, and no warning names them as a run's escapees."""
    jsonl = tmp_path / "m.jsonl"
    if command == "run":
        argv = cli_command() + ["run", "--jsonl", str(jsonl), "--", "true"]
        events = jsonl
    elif command == "bench":  # its sweep after each run; its streams say the mechanism
        argv = cli_command() + ["bench", "--runs", "2", "--warmup", "0", "--jsonl-dir", str(tmp_path / "s"), "true"]
        events = None
    else:
        manifest = tmp_path / "manifest.jsonl"
        manifest.write_text(json.dumps({"id": "plain", "args": ["true"]}) + "\n")
        argv = cli_command() + ["batch", str(manifest), "--out", str(tmp_path / "out")]
        events = tmp_path / "out" / "plain" / "events.jsonl"
    pid_file = tmp_path / "inherited"
    argv[0] = shutil.which(argv[0]) or argv[0]
    proc = subprocess.run(
        [PY, "-c", HAND_OVER, str(pid_file), *argv], capture_output=True, stdin=subprocess.DEVNULL, timeout=60
    )
    survivors.append(int(pid_file.read_text()))
    if events is None:
        events = sorted((tmp_path / "s").rglob("*.jsonl"))[0]
    require_mechanism(read_events_tolerant(events), containment)
    assert proc.returncode == 0, proc.stderr
    assert pid_alive(survivors[0]), "the sweep after the run ended a process the runner had inherited"
    assert b"process group" not in proc.stderr, proc.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_an_escapee_that_became_another_user_leaves_the_exit_status_as_runner_exit_said(
    tmp_path, containment, survivors
):
    """A runner without CAP_KILL whose run's escapee changed its user is refused the kill: the
    escapee is left running and said on stderr (process groups), and the exit status is still
    the one ``runner_exit`` gave (docs/events.md), never an internal error's."""
    pid_file, jsonl = tmp_path / "escapee", tmp_path / "m.jsonl"
    argv = ["run", "--jsonl", str(jsonl), "--", PY, "-c", BECOME_NOBODY, str(pid_file)]
    without_kill = ["setpriv", "--bounding-set", "-kill", "--inh-caps", "-kill", "--"]
    proc = subprocess.run(
        without_kill + cli_command() + argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=60
    )
    survivors.append(int(pid_file.read_text()))
    events = read_events_tolerant(jsonl)
    require_mechanism(events, containment)
    (ended,) = [event for event in events if event["event"] == "runner_exit"]
    assert proc.returncode == ended["code"] == 0, proc.stderr
    said = [line for line in proc.stderr.decode().splitlines() if "now belong to another user" in line]
    if containment == "process_group":
        assert pid_alive(survivors[0]) and len(said) == 1, proc.stderr
    else:
        assert not said, proc.stderr
    assert "Traceback" not in proc.stderr.decode(), proc.stderr


def test_a_member_that_joined_the_runners_own_group_is_ended_and_said(tmp_path, containment, survivors):
    """A run's member that joined the runner's process group is outside the run's group, as a
    setsid daemon is, and the teardown misses it: ``run`` ends it after the run and says so
    (under cgroup v2 the run's group held it)."""
    pid_file, jsonl = tmp_path / "joined", tmp_path / "m.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, "--", PY, "-c", JOIN_THE_RUNNERS_GROUP, pid_file)
    survivors.append(int(pid_file.read_text()))
    require_mechanism(read_events_tolerant(jsonl), containment)
    assert proc.returncode == 0, proc.stderr
    deadline = time.monotonic() + 60
    while pid_alive(survivors[0]) and time.monotonic() < deadline:  # a zombie until init reaps it
        time.sleep(0.01)
    assert not pid_alive(survivors[0]), "a member that joined the runner's group outlived the run"
    said = [line for line in proc.stderr.decode().splitlines() if "had left its process group" in line]
    assert len(said) == (1 if containment == "process_group" else 0), proc.stderr


def _hand_over_then_orphan(tmp_path, command: str, where: str) -> tuple[subprocess.CompletedProcess, Path, int]:
    """``command`` run by a process that first forks the caller's job (``HAND_OVER_THEN_ORPHAN``,
    ``where``), whose orphan is made once the run has started: the CLI's result, the events'
    path and the orphan's pid."""
    pid_file = tmp_path / "orphan"
    run_argv = [PY, "-c", ORPHAN_NOW, str(pid_file)]
    if command == "run":
        events = tmp_path / "m.jsonl"
        argv = cli_command() + ["run", "--jsonl", str(events), "--", *run_argv]
    else:
        manifest = tmp_path / "manifest.jsonl"
        manifest.write_text(json.dumps({"id": "orphans", "args": run_argv}) + "\n")
        argv = cli_command() + ["batch", str(manifest), "--out", str(tmp_path / "out")]
        events = tmp_path / "out" / "orphans" / "events.jsonl"
    argv[0] = shutil.which(argv[0]) or argv[0]
    proc = subprocess.run(
        [PY, "-c", HAND_OVER_THEN_ORPHAN, str(pid_file), where, *argv],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    return proc, events, int(pid_file.read_text())


@pytest.mark.parametrize("where", ["own_session", "runners_group"])
@pytest.mark.parametrize("command", ["run", "batch"])
def test_what_the_callers_job_orphans_after_the_first_run_is_never_ended_nor_said(
    tmp_path, containment, command, where, survivors
):
    """An orphan of the caller's job made once the run started comes to the runner (its
    subreaper) outside the job's subtree, but in the job's session or group (the runner's own
    group, here): the caller's, spared by the sweep and never said as a run's escapee."""
    proc, events, pid = _hand_over_then_orphan(tmp_path, command, where)
    survivors.append(pid)
    require_mechanism(read_events_tolerant(events), containment)
    assert proc.returncode == 0, proc.stderr
    assert pid_alive(survivors[0]), "the sweep after the run ended an orphan of the caller's job"
    assert b"process group" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("command", ["run", "batch"])
def test_a_daemon_of_the_callers_job_made_during_a_cgroup_v2_run_is_never_ended_nor_listed(
    tmp_path, monkeypatch, command, survivors
):
    """``sh -c '(sleep 1; setsid -f daemon) & exec processkit-cli run ...'``: the daemon leads a
    session of its own and comes to the runner outside every subtree, group and session it knew,
    but in the runner's own cgroup v2 group, where the caller's jobs are born and a v2 run's
    members are not: the caller's, alive after the run, not in ``remaining_pids`` and not said.
    (Under process-group containment nothing tells it from a run's daemon: docs/differences.md.)"""
    monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    proc, events, pid = _hand_over_then_orphan(tmp_path, command, "daemon")
    survivors.append(pid)
    found = read_events_tolerant(events)
    require_mechanism(found, "cgroup_v2")
    assert proc.returncode == 0, proc.stderr
    assert pid_alive(pid), "the sweep ended the caller's daemon"
    finished = [event for event in found if event["event"] == "cleanup_finished"]
    assert finished and finished[0]["remaining_pids"] == [], finished
    assert b"had left" not in proc.stderr, proc.stderr


# The runner's process: a child of its own first (the caller's, in a session of its own), then
# the CLI with argv[2:], its ``end_escapees`` counting the ``waitid`` calls it makes; written to
# argv[1] with whether the caller's child still lives, which is then ended.
COUNT_LOOKS = r"""
import json, os, signal, sys, time
looks_file, argv = sys.argv[1], sys.argv[2:]
inherited = os.fork()
if inherited == 0:
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    time.sleep(60)
    os._exit(0)
from processkit.containment import escaped
from processkit.cli.main import main

real_end, real_waitid, looks = escaped.end_escapees, os.waitid, []

def end_escapees(*args, **kwargs):
    def waitid(*given):
        looks.append(given)
        return real_waitid(*given)

    os.waitid = waitid
    try:
        return real_end(*args, **kwargs)
    finally:
        os.waitid = real_waitid

escaped.end_escapees = end_escapees
try:
    code = main(argv)
finally:
    with open(looks_file, "w") as out:
        json.dump({"looks": len(looks), "inherited": os.waitpid(inherited, os.WNOHANG) == (0, 0)}, out)
    os.kill(inherited, signal.SIGKILL)
    os.waitpid(inherited, 0)
sys.exit(code)
"""

# The run's command: a setsid daemon, its pid written once it has left the run's group.
SETSID_DAEMON = (
    LINGER
    + r"""
where = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    linger(where)
while not os.path.exists(where):
    time.sleep(0.01)
"""
)


@pytest.mark.parametrize("command", ["run", "batch"])
def test_the_sweep_looks_after_every_run_and_says_only_what_left_the_boundary(
    tmp_path, containment, command, survivors
):
    """A run of either mechanism makes the runner a subreaper (under cgroup v2 a member may write
    itself out of its group: ``test_cgroup_escapees``), so the sweep looks after either; the
    setsid daemon is gone after the run, the caller's own child from before the run lives, and
    only a process-group run's daemon, which left its boundary, is said (the cgroup v2 group
    held it, and its kill ended it)."""
    pid_file, looks_file = tmp_path / "escapee", tmp_path / "looks.json"
    run_argv = [PY, "-c", SETSID_DAEMON, str(pid_file)]
    if command == "run":
        events = tmp_path / "events.jsonl"
        argv = ["run", "--jsonl", str(events), "--", *run_argv]
    else:
        manifest = tmp_path / "manifest.jsonl"
        manifest.write_text(json.dumps({"id": "escape", "args": run_argv}) + "\n")
        events = tmp_path / "out" / "escape" / "events.jsonl"
        argv = ["batch", str(manifest), "--out", str(tmp_path / "out")]
    proc = subprocess.run(
        [PY, "-c", COUNT_LOOKS, str(looks_file), *argv], capture_output=True, stdin=subprocess.DEVNULL, timeout=120
    )
    survivors.append(int(pid_file.read_text()))
    assert proc.returncode == 0, proc.stderr
    require_mechanism(read_events_tolerant(events), containment)
    seen = json.loads(looks_file.read_text())
    assert seen["inherited"], "the sweep ended the caller's own child"
    assert not pid_alive(survivors[0]), "the run's setsid daemon outlived the run"
    assert seen["looks"] >= 1, seen
    assert (b"had left" in proc.stderr) == (containment == "process_group"), (seen, proc.stderr)


@pytest.mark.parametrize(("command", "fails"), [("batch", False), ("batch", True), ("run", False), ("bench", False)])
def test_json_mode_says_an_escapee_beside_the_envelope(tmp_path, monkeypatch, survivors, command, fails):
    """``--error-format json``: stderr holds the envelope alone but for the warnings the
    reference writes beside it; an escapee killed after the runs is one of them, before the
    envelope (the last line) where the batch fails, and alone where it exits 0 and writes none.
    ``bench`` ends one after each run and names the first in the same words, once: three runs
    leaving one each say one line (the others ended, counted in its summary's ``left``)."""
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    pid_file = tmp_path / "escapee"
    daemon = [PY, "-c", SETSID_DAEMON, str(pid_file)]
    if command == "run":
        argv, whose = ["run", "--jsonl", tmp_path / "e.jsonl", "--", *daemon], "this run had left its process group"
    elif command == "bench":  # each run's daemon writes its own file, named by its run's pid
        pids = tmp_path / "pids"
        pids.mkdir()
        pid_file = pids / "first"
        each = ["sh", "-c", 'exec "$0" -c "$1" "$2/$$"', PY, SETSID_DAEMON, str(pids)]
        argv, whose = (
            ["bench", "--runs", "3", "--warmup", "0", "--", *each],
            "this benchmark's run had left its process group",
        )
    else:
        manifest = tmp_path / "manifest.jsonl"
        lines = [{"id": "escape", "args": daemon}] + ([{"id": "bad", "args": ["false"]}] if fails else [])
        manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
        argv, whose = ["batch", manifest, "--out", tmp_path / "out"], "this batch's jobs had left"
    proc = run_cli("--error-format", "json", *argv, cwd=tmp_path)
    if command == "bench":
        ended = sorted(int(path.read_text()) for path in pid_file.parent.iterdir() if path.suffix != ".tmp")
        survivors.extend(ended)
        assert len(ended) == 3 and not any(pid_alive(pid) for pid in ended), ended
        assert b" left 3 processes outside" in proc.stdout, proc.stdout  # every run's counted
    else:
        survivors.append(int(pid_file.read_text()))
    assert not pid_alive(survivors[0]), "the setsid daemon outlived its run"
    said = proc.stderr.decode().splitlines()
    assert said and said[0].startswith(f"processkit-cli: warning: 1 process(es) of {whose}"), said
    assert any(f"killed now (pid {pid} " in said[0] for pid in survivors), said  # bench's: its first run's
    if fails:
        assert proc.returncode == 117 and len(said) == 2, said
        assert json.loads(said[1])["kind"] == "batch_failed", said
    else:
        assert proc.returncode == 0 and len(said) == 1, said
