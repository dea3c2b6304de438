"""The load the gate judges a busy machine by is the load on the CPUs the runs may use: ``--cpus``'
set, else the affinity ``bench`` was started with (a container's cpuset, a ``taskset``). A
neighbour spinning on the runs' own CPU was spread over every CPU of the host, so on a host of
eight CPUs it read 0.125 of the time, under the gate's quarter, and an unchanged command whose
wall time it doubled failed (``processkit/benchmark/host_load.py``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAFETY_NET, cli_command, run_cli
from own_tmp import PRIVATE_MOUNTS
from processkit.benchmark.gate import BUSY_SHARE

TWO_CPUS = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 or 0 not in os.sched_getaffinity(0), reason="needs CPU 0 and another"
)
SPIN = "import os, sys; os.sched_setaffinity(0, {0}); print('spinning', flush=True)\nwhile True: pass"


def pin_to_cpu0() -> None:
    os.sched_setaffinity(0, {0})


@TWO_CPUS
@pytest.mark.parametrize("how", ["--cpus", "affinity"])
def test_the_load_is_read_on_the_cpus_the_runs_may_use(tmp_path, how):
    spinner = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE)
    try:
        assert spinner.stdout.readline() == b"spinning\n"
        pinned = {"--cpus": {"args": ("--cpus", "0")}, "affinity": {"preexec_fn": pin_to_cpu0}}[how]
        done = run_cli(
            "bench", "-N", "--runs", "60", "--style", "none", "--export-json", tmp_path / "out.json",
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


def _load_under(tmp_path, cpu_lines) -> dict:
    """``host_load`` of a benchmark whose /proc/stat shows ``cpu_lines`` (given the host's CPU
    lines) for its CPUs, bound over it in a mount namespace of the benchmark's own."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    real = Path("/proc/stat").read_text().splitlines()
    shown = [line for line in real if re.match(r"cpu\d+ ", line)]
    stat = tmp_path / "stat"
    stat.write_text("\n".join([*(line for line in real if line not in shown), *cpu_lines(shown)]) + "\n")
    bound = [*PRIVATE_MOUNTS, "sh", "-c", 'mount --bind "$0" /proc/stat && exec "$@"']
    done = subprocess.run(
        [*bound, stat, *cli_command(), "bench", "-N", "--runs", "2", "--style", "none", "--export-json", tmp_path / "out.json", "true"],
        capture_output=True, stdin=subprocess.DEVNULL, timeout=SAFETY_NET,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads((tmp_path / "out.json").read_text())["processkit"]["host_load"]


def _renumbered(shown: list[str]) -> list[str]:
    return [f"cpu{int(line[3:].split()[0]) + 4096} {line.split(None, 1)[1]}" for line in shown]


def test_a_proc_stat_numbered_otherwise_than_the_affinity_counts_every_cpu_it_shows(tmp_path):
    """lxcfs shows a container's CPUs as cpu0 on, whatever the cpuset's numbers: no line named a
    CPU of the affinity, and the share was unknown (no ``host_load``). Here /proc/stat is one
    whose CPU lines are numbered past the host's."""
    load = _load_under(tmp_path, _renumbered)
    shown = [line for line in Path("/proc/stat").read_text().splitlines() if re.match(r"cpu\d+ ", line)]
    assert load is not None and load["cpus"] == len(shown), load


@TWO_CPUS
def test_one_proc_stat_line_beside_an_affinity_of_several_is_said(tmp_path):
    """lxcfs may show one CPU line (a container's quota of one CPU) while the runs may use
    several: ``cpus`` counts the line, ``affinity_cpus`` the CPUs the runs were given, which the
    gate's off-CPU rule needs to be one (``benchmark/gate_off_cpu.py``)."""
    load = _load_under(tmp_path, lambda shown: shown[:1])
    assert load["cpus"] == 1 and load["affinity_cpus"] == len(os.sched_getaffinity(0)), load
