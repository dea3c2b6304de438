"""A command that mostly waits (a sleep, I/O, the network) on a busy machine: CPU time counts no
wait, so it cannot vouch for its wall time. ``sleep 0.01`` measured beside others' load, then
``sleep 0.03`` under its name: the baseline's block said 138 % slower, the gate ``passed: no
significant change by the fastest run's CPU time`` (exit 0), as a 95 % load's stretch of its
CPU part (up to 19 times its ~1 ms) allowed for the longer sleep. That stretch vouches for a
CPU-bound command only (``benchmark/gate.py``, ``CPU_BOUND``: a CPU-bound command's unchanged
wall time beside busy neighbours still passes, ``test_bench_gate.py``).

The baseline is written by hand (an export of ours, its figures replaced), so neither the
machine's load nor its speed decides what the test sees: its host 95 % busy (the most the gate
allows for), its runs 0.8 of the sleep's wall time (so the sleep is beyond the threshold
whatever its start-up costs) and 5 ms of CPU each (more than a sleep spends: no CPU slowdown
decides first)."""

from __future__ import annotations

import json

from conftest import run_cli

SLEEP = 0.03


def _baseline(tmp_path):
    path = tmp_path / "base.json"
    made = run_cli("bench", "-N", "--runs", "5", "-n", "nap", "true", "--export-json", path, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    base = json.loads(path.read_text())
    base["processkit"]["host_load"]["others_cpu_share"] = 0.95
    for result in base["results"]:
        result["times"] = [SLEEP * 0.8 * (1 + index / 1000) for index in range(5)]
        result["user_times"], result["system_times"] = [0.005] * 5, [0.0] * 5
        result["counters"] = None  # a host with a hardware PMU would judge by instructions first
    path.write_text(json.dumps(base))
    return path


def test_a_command_that_waits_longer_is_never_passed_by_its_cpu_time_on_a_busy_machine(tmp_path):
    gate = ("--baseline", _baseline(tmp_path), "--fail-if-slower", "5")
    later = run_cli(
        "bench", "-N", "--runs", "5", "-n", "nap", f"sleep {SLEEP}", "--export-json", tmp_path / "out.json", *gate,
        cwd=tmp_path,
    )  # fmt: skip
    said = later.stdout.decode() + later.stderr.decode()
    (decided,) = json.loads((tmp_path / "out.json").read_text())["gate"]["commands"]
    assert decided["figure"] == "wall" and decided["outcome"] != "passed", decided
    assert decided["change_percent"] > 15, decided  # beyond the threshold and what contention adds
    if "within what load can add" in decided["reason"]:  # a 95 % load's stretch of its CPU time covers it
        assert decided["outcome"] == "inconclusive" and later.returncode == 0, said
        assert "of its wall time (it mostly waits, or the load slowed both sides)" in said, said
        assert "the machine was busy (other processes took" in said, said
    else:  # its wait was longer than even that stretch: a regression by wall time, as before
        assert decided["outcome"] == "regressed" and later.returncode == 119, said
