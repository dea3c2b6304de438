"""``prune`` (no grace) while another process holds a dead run's lock: a sweep from the moment
it takes the lock (a second ``prune``, a run's sweep on its way in, or one leaving the run for
its grace). ``prune`` took the run for live and exited 0 at once, saying nothing, the run's
directory, group and members left. It now reads the lock's holders from the kernel on every
attempt that finds the lock held, waits (bounded) for one that is not the run's runner, tries
again at once when none is shown (the lock let go between the attempt and the read), then ends
what the run left. The test holds the lock itself, as a sweep takes it (``flock``), and lets it
go as soon as ``prune`` has the lock's file open: at whatever step of its probe that finds
``prune`` (its first attempt, its read of the holders, its wait), the run must be ended.
tests/test_sweep_mark.py lets the lock go exactly between the attempt and the read."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys

from conftest import SAFETY_NET, pid_alive, run_cli, start_cli, wait_for_file
from own_tmp import OwnTmp, own_tmp  # noqa: F401
from run_groups import groups_of
from streams import wait_until
from test_reaping import TREE, run_dirs_of


def _has_open(pid: int, lock: os.stat_result) -> bool:
    """Whether the process ``pid`` holds a descriptor on the file ``lock``."""
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for name in names:
        try:
            found = os.stat(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if (found.st_dev, found.st_ino) == (lock.st_dev, lock.st_ino):
            return True
    return False


def test_prune_waits_for_a_process_holding_a_dead_runs_lock_then_ends_the_run(own_tmp, tmp_path, isolated_registry):
    tmp: OwnTmp = own_tmp
    pidfile, jsonl = tmp_path / "grandchild.pid", tmp_path / "victim.jsonl"
    victim = start_cli(
        "run", "--jsonl", jsonl, "--", sys.executable, "-c", TREE, pidfile, "0", stdout=subprocess.DEVNULL
    )
    wait_for_file(pidfile)
    grandchild = int(pidfile.read_text())
    victim.kill()
    victim.communicate(timeout=SAFETY_NET)
    (left,) = run_dirs_of(tmp, victim.pid)
    groups = groups_of(victim.pid)
    lock_path = os.path.join(tmp.outside(left), "live.lock")
    held = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC)
    prune = None
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a sweep takes it: the runner is dead
        lock = os.fstat(held)
        prune = start_cli("prune", "--json", "--report-reaped")
        waiting = wait_until(
            lambda: "exited" if prune.poll() is not None else _has_open(prune.pid, lock) and "waiting",
            what="prune probing the held lock, or its end",
        )
        assert waiting == "waiting", (
            "prune took the dead run for live and returned, leaving it: " + prune.communicate()[0].decode()
        )
        os.close(held)
        held = -1
        out, err = prune.communicate(timeout=SAFETY_NET)
        assert prune.returncode == 0, err
        reaped = json.loads(out)["reaped"]
        token = os.path.basename(left)[len("pkc-") :]
        assert left in reaped["run_dirs"] and not [item for item in reaped["left"] if token in item["what"]], reaped
        assert set(groups) <= set(reaped["groups"]), reaped
        assert run_dirs_of(tmp, victim.pid) == [] and groups_of(victim.pid) == []
        assert wait_until(lambda: not pid_alive(grandchild), what="the grandchild's end")
    finally:
        if held >= 0:
            os.close(held)
        if prune is not None and prune.poll() is None:
            prune.kill()
            prune.wait()
        if pid_alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)
        run_cli("prune")  # what a failed check left
