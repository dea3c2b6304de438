"""The load the gate judges a busy machine by is the load on the CPUs the runs may use: ``--cpus``'
set, else the affinity ``bench`` was started with (a container's cpuset, a ``taskset``). A
neighbour spinning on the runs' own CPU was spread over every CPU of the host, so on a host of
eight CPUs it read 0.125 of the time, under the gate's quarter, and an unchanged command whose
wall time it doubled failed (``processkit/benchmark/host_load.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import SAFETY_NET, run_cli
from processkit.benchmark.gate import BUSY_SHARE

pytestmark = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 or 0 not in os.sched_getaffinity(0), reason="needs CPU 0 and another"
)
SPIN = "import os, sys; os.sched_setaffinity(0, {0}); print('spinning', flush=True)\nwhile True: pass"


def pin_to_cpu0() -> None:
    os.sched_setaffinity(0, {0})


@pytest.mark.parametrize("how", ["--cpus", "affinity"])
def test_the_load_is_read_on_the_cpus_the_runs_may_use(tmp_path, how):
    spinner = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE)
    try:
        assert spinner.stdout.readline() == b"spinning\n"
        pinned = {"--cpus": {"args": ("--cpus", "0")}, "affinity": {"preexec_fn": pin_to_cpu0}}[how]
        done = run_cli(
            "bench", "-N", "--runs", "5", "--style", "none", "--export-json", tmp_path / "out.json",
            *pinned.get("args", ()), "true", preexec_fn=pinned.get("preexec_fn"), timeout=SAFETY_NET,
        )  # fmt: skip
    finally:
        spinner.kill()
        spinner.wait()
    assert done.returncode == 0, done.stderr
    load = json.loads((tmp_path / "out.json").read_text())["processkit"]["host_load"]
    assert load["cpus"] == 1, load  # CPU 0's line alone, not the host's every CPU
    # The spinner held CPU 0 beside the benchmark (a fair share of it, the whole of it between
    # runs): the machine the gate judges is busy (BUSY_SHARE), whatever the other CPUs did.
    assert load["others_cpu_share"] >= BUSY_SHARE, load
