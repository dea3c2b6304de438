"""A child that lowers its runner's open-file limit (``prlimit --pid $PPID --nofile=20:20``) leaves
the runner short of descriptors: its line said ``the open-file limit (ulimit -n: 20) is reached;
raise the limit``, though the caller's limit was 20000 and raising it would change nothing. It now
says the limit was lowered under it (``fdlimit.exhausted``), and the tree is still ended."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import SAFETY_NET, pid_alive, read_events, start_cli
from run_groups import groups_of


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="no prlimit(1)")
@pytest.mark.parametrize("limit", ["20:20", "20:"])
def test_a_limit_lowered_by_the_child_is_said_so_not_raise_the_limit(tmp_path, pump_backend, limit):
    stream, pidfile = tmp_path / "run.jsonl", tmp_path / "child.pid"
    script = f"prlimit --pid $PPID --nofile={limit}; echo $$ > {pidfile}; echo x; exec sleep 30"
    proc = start_cli(
        "run", "--jsonl", stream, "--capture-dir", tmp_path / "cap", "--", "sh", "-c", script, cwd=tmp_path
    )
    _, said = proc.communicate(timeout=SAFETY_NET)
    child, deadline = int(pidfile.read_text()), time.monotonic() + SAFETY_NET
    while pid_alive(child):  # the tree is ended with the runner (its parent-death signal), not left to run on
        assert time.monotonic() < deadline, "the child outlived its runner"
        time.sleep(0.02)
    for group in reversed(groups_of(proc.pid)):  # a runner cut short leaves its groups, empty now
        os.rmdir(group)
    if proc.returncode == 0:
        pytest.skip("the run held few enough descriptors to finish under the lowered limit")
    err = said.decode()
    assert "lowered from" in err and "raise the limit" not in err, err
    assert "(ulimit -n: 20)" in err, err
    assert read_events(stream)[0]["event"] == "run_started"


def test_a_limit_already_at_its_hard_one_is_held_too(tmp_path):
    """``raise_soft_limit`` (the API's runner service, a batch) returned before it noted the limit
    where the soft one was already the hard one (the service's, usually): a limit a child lowered
    there still said ``raise the limit``. In a process of its own: the limits are changed."""
    script = (
        "import resource\n"
        "from processkit import fdlimit\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))\n"
        "fdlimit.raise_soft_limit()\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (20, 20))\n"
        "print(fdlimit.exhausted('to go on'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, timeout=SAFETY_NET)
    assert done.returncode == 0, done.stderr.decode()
    said = done.stdout.decode()
    assert "(ulimit -n: 20) is reached, lowered from 512 by another process" in said, said


# A teardown cut short by the open-file limit before any kill of the group: ``end``'s first step
# fails as an open did, and the last resort's kill is not made (its module's import failed so).
CUT_SHORT = (
    "teardown", "end", "lambda *a: (_ for _ in ()).throw(OSError(24, 'Too many open files'))",
    "salvage", "_kill", "lambda container: True",
)  # fmt: skip


def test_orphans_of_a_teardown_the_limit_cut_short_are_not_said_to_have_left_the_group(tmp_path, pump_backend):
    """``prlimit --pid $PPID --nofile=20:20`` under a child that left 30 orphaned sleeps cut the
    teardown short; the sweep after the run ended them, still in the run's cgroup, and said they
    ``had left its cgroup (it wrote itself into another group's cgroup.procs)`` and ``outlived its
    group's kill``: none left it, and its kill was never confirmed. It now names no cause. The
    limit's cut falls where the runner's descriptors happen to run out, so it is injected here."""
    stream = tmp_path / "run.jsonl"
    script = "for i in 1 2 3; do (sleep 30 >/dev/null 2>&1 &); done"
    proc = start_cli("run", "--jsonl", stream, "--", "sh", "-c", script, cwd=tmp_path, patched=CUT_SHORT)
    _, err = proc.communicate(timeout=SAFETY_NET)
    for group in reversed(
        groups_of(proc.pid)
    ):  # the cut teardown's release left them, empty now: not this test's point
        os.rmdir(group)
    if read_events(stream)[0]["mechanism"] != "cgroup_v2":
        pytest.skip("the run has no cgroup v2 group here")
    said = [line for line in err.decode().splitlines() if "process(es) of this run" in line]
    assert proc.returncode == 104 and said, err.decode()
    assert len(said) == 1 and re.fullmatch(
        r"processkit-cli: warning: 3 process\(es\) of this run outlived a teardown that could not finish: "
        r"killed now \(pids \d+ sleep, \d+ sleep, \d+ sleep\)",
        said[0],
    ), said
