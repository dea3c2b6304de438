"""``prune`` and another sweep at work on the same dead run (containment/sweep.py). Every run
sweeps its parents on its way in, so on a busy host a ``prune`` after a SIGKILL may find one
holding the dead run's lock: it took the run for live and returned, its groups still there (a
SIGKILLed bench's 14 pool groups once, gone moments later), or left for good where that sweep,
not waiting, could not remove one whose last member was still exiting. Now ``prune`` reads the
lock's holder from the kernel (``/proc/locks``), waits for one that is not the run's runner,
then ends what it left."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_file
from run_groups import groups_of
from test_containment_pool import accounted

pytestmark = pytest.mark.skipif(not accounted(), reason="no writable cgroup v1 accounting hierarchies")

# A run's sweep on its way in (no waiting), held on cue once it holds the dead run's lock.
SWEEPER = r"""
import os, sys, time
from processkit.containment import sweep, sweep_dead

holding, release = sys.argv[1], sys.argv[2]
end_groups = sweep_dead._end_groups

def held_end_groups(*args, **kwargs):
    open(holding, "w").close()
    while not os.path.exists(release):
        time.sleep(0.01)
    return end_groups(*args, **kwargs)

sweep_dead._end_groups = held_end_groups
sweep.sweep(sweep.parents(), sweep.Reaped(), attempts=sweep.CREATE_ATTEMPTS, wait=False)
"""


def test_a_prune_while_another_sweep_holds_a_dead_bench_waits_and_leaves_no_group(tmp_path):
    runtime = tmp_path / "runtime"  # the bench's directory where no other helper's sweep looks
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    holding, release = tmp_path / "holding", tmp_path / "release"
    bench = start_cli("bench", "--runs", "100000", "--warmup", "0", "--style", "none", "--", "true", env=env)
    sweeper = prune = None
    try:
        deadline = time.monotonic() + SAFETY_NET
        while not glob.glob(f"{runtime}/pkc-{bench.pid}-*") or not groups_of(bench.pid):
            assert time.monotonic() < deadline, "the bench lodged no run and borrowed no group"
            time.sleep(0.05)
        bench.send_signal(signal.SIGKILL)
        bench.communicate(timeout=SAFETY_NET)
        sweeper = subprocess.Popen([sys.executable, "-c", SWEEPER, str(holding), str(release)], env=env)
        wait_for_file(holding)  # it holds the dead bench's lock
        prune = start_cli("prune", "--json", "--report-reaped", env=env)
        try:
            prune.wait(timeout=2)  # before: it took the run for live and returned at once
        except subprocess.TimeoutExpired:
            release.touch()  # now: it waits for the sweep, which goes on
        out, err = prune.communicate(timeout=60)
        assert prune.returncode == 0, err
        assert groups_of(bench.pid) == [], out
    finally:
        release.touch()
        for proc in (bench, sweeper, prune):
            if proc is not None and proc.poll() is None:
                proc.kill()
            if proc is not None:
                proc.wait()
        run_cli("prune", env=env)  # what a failed check left
