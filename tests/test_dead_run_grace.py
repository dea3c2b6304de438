"""A run's sweep on its way in leaves a run whose runner has only just died (containment/sweep.py,
``grace``): right after a runner's SIGKILL the tree shows what the platform alone did (the root
ended by its parent-death signal, the grandchild alive: ``abrupt_cleanup: direct_child_only``),
however many runs start meanwhile; the reference's own ``tests/e2e.rs``
(``abrupt_runner_death_reports_and_enforces_platform_scope``) looks at it then, while its other
tests start runs beside it. A run once the grace has passed, or ``prune`` at once, ends the tree.

The grace is measured from the ``dead`` mark the first sweep leaves in the run's directory; the
test ages that mark (its time is what a sweep reads) rather than waiting the grace out."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from processkit.containment import sweep
from processkit.rundir import DEAD_NAME

from conftest import SAFETY_NET, pid_alive, read_events_tolerant, run_cli, start_cli, wait_for_file
from own_tmp import OwnTmp, own_tmp  # noqa: F401
from run_groups import groups_of
from streams import wait_until
from test_reaping import PY, TREE, run_dirs_of


@pytest.fixture(autouse=True)
def tmp(own_tmp, monkeypatch) -> OwnTmp:
    monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    return own_tmp


def _killed_runner(tmp: OwnTmp, tmp_path) -> tuple[int, int]:
    """A runner SIGKILLed while its root and grandchild live, once the root has died of it, and
    a run started right after: the runner's pid and the grandchild's."""
    pidfile, jsonl = tmp_path / "grandchild.pid", tmp_path / "victim.jsonl"
    victim = start_cli("run", "--jsonl", jsonl, "--", PY, "-c", TREE, pidfile, "1", stdout=subprocess.DEVNULL)
    wait_for_file(pidfile)
    started = read_events_tolerant(jsonl)[0]
    grandchild = int(pidfile.read_text())
    if not groups_of(victim.pid):
        victim.kill()
        victim.communicate(timeout=SAFETY_NET)
        run_cli("prune")
        pytest.skip("this host gives runs no cgroup groups: a run's sweep on its way in has nothing to find")
    assert (started["event"], started["abrupt_cleanup"]) == ("run_started", "direct_child_only")
    victim.kill()
    victim.communicate(timeout=SAFETY_NET)
    assert wait_until(lambda: not pid_alive(started["root_pid"]), SAFETY_NET), "the root outlived its runner"
    assert run_cli("run", "--jsonl", tmp_path / "next.jsonl", "--", "true").returncode == 0
    assert pid_alive(grandchild), "a run's sweep ended a tree whose runner had only just died"
    assert groups_of(victim.pid)
    return victim.pid, grandchild


def _counts_agree(lines: list[str]) -> bool:
    """prune's count of what dead runners left has each noun agree with its number (before, ``would
    end 1 processes of dead runners (1 cgroups, 0 process groups, 1 run directories)``)."""
    (line,) = [line for line in lines if " of dead runners (" in line]
    singular = {"process", "cgroup", "process group", "run directory"}
    pairs = re.findall(r"(\d+) (process groups?|processes|process|cgroups?|run director(?:y|ies))", line)
    return len(pairs) == 4 and all((int(count) == 1) == (noun in singular) for count, noun in pairs)


def test_a_run_right_after_a_runners_death_leaves_its_tree_and_prune_ends_it_at_once(tmp, tmp_path):
    victim, grandchild = _killed_runner(tmp, tmp_path)
    dry = run_cli("prune", "--dry-run").stdout.decode().splitlines()
    assert any(" 1 process of dead runners (" in line for line in dry) and _counts_agree(dry), dry
    reaped = json.loads(run_cli("prune", "--json", "--report-reaped").stdout)["reaped"]
    assert not pid_alive(grandchild), "prune left the dead run's tree running"
    assert reaped["processes"] >= 1 and groups_of(victim) == [] and run_dirs_of(tmp, victim) == []


def test_a_run_once_the_grace_has_passed_ends_the_dead_tree(tmp, tmp_path):
    victim, grandchild = _killed_runner(tmp, tmp_path)
    (found,) = run_dirs_of(tmp, victim)
    mark = os.path.join(tmp.outside(found), DEAD_NAME)
    seen = os.stat(mark).st_mtime - sweep.DEAD_GRACE_SECONDS
    os.utime(mark, (seen, seen))  # first seen dead a grace ago
    assert run_cli("run", "--jsonl", tmp_path / "later.jsonl", "--", "true").returncode == 0
    assert wait_until(lambda: not pid_alive(grandchild), SAFETY_NET), "the run left the dead run's tree running"
    # The run did not wait for the killed members to exit; the next one removes the emptied groups.
    assert run_cli("run", "--jsonl", tmp_path / "after.jsonl", "--", "true").returncode == 0
    assert groups_of(victim) == [] and run_dirs_of(tmp, victim) == []


def test_a_lockless_directory_holding_only_a_sweeps_mark_is_removed(tmp):
    """An earlier version's sweep (which knows no ``dead`` mark) ends a marked dead run's tree and
    unlinks its lock, but cannot remove its directory for the mark in it: prune removes what is
    left (listing it under ``--dry-run``), where it would otherwise be left by every prune."""
    left = f"/tmp/pkc-{os.getpid()}-{os.urandom(6).hex()}-3"
    os.mkdir(tmp.outside(left), 0o700)
    os.close(os.open(os.path.join(tmp.outside(left), DEAD_NAME), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    os.utime(tmp.outside(left), (1, 1))  # old enough not to be one a runner is making
    try:
        dry = json.loads(run_cli("prune", "--dry-run", "--json", "--report-reaped").stdout)["reaped"]
        assert left in dry["run_dirs"] and left not in [entry["what"] for entry in dry["left"]]
        assert _counts_agree(run_cli("prune", "--dry-run").stdout.decode().splitlines())
        assert os.path.isdir(tmp.outside(left))
        reaped = json.loads(run_cli("prune", "--json", "--report-reaped").stdout)["reaped"]
        assert left in reaped["run_dirs"] and not os.path.lexists(tmp.outside(left))
    finally:
        if os.path.lexists(tmp.outside(left)):
            shutil.rmtree(tmp.outside(left))


LONG_LIVED = """
import os, sys, processkit
grandchild, mark = int(sys.argv[1]), sys.argv[2]

def alive(pid):  # conftest.pid_alive's rule, in the child's script: a zombie is gone; the suite's process may be the subreaper that has not reaped it
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False

os.utime(mark)  # first seen dead now: the grace starts as this process is ready, not at its start-up
processkit.run(["true"])  # its sweep finds the dead run inside its grace: it leaves it
print("left" if alive(grandchild) else "ended", flush=True)
while alive(grandchild):  # the test's safety net bounds this
    processkit.run(["true"])
print("ended", flush=True)
"""


def test_a_long_lived_process_sweeps_again_once_the_grace_it_left_a_run_for_is_over(tmp, tmp_path):
    """A process that sweeps each cgroup parent once in its life (the API runner service, a batch)
    looks again, on a run after the grace is over, where its sweep left a dead run for its grace."""
    victim, grandchild = _killed_runner(tmp, tmp_path)
    (found,) = run_dirs_of(tmp, victim)
    server = subprocess.Popen(
        [*tmp.prefix, sys.executable, "-c", LONG_LIVED, str(grandchild), os.path.join(found, DEAD_NAME)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        out, _ = server.communicate(timeout=SAFETY_NET)
    except subprocess.TimeoutExpired:
        server.kill()
        out, _ = server.communicate()
    if out.split() == [b"ended", b"ended"]:  # its service took longer than the grace to start: no revisit to show
        pytest.skip("the runner service started only after the dead run's grace was over")
    assert out.split() == [b"left", b"ended"], "a long-lived process left the dead run's tree for its whole life"
    assert run_cli("prune").returncode == 0 and run_dirs_of(tmp, victim) == []
