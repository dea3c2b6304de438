"""A command that waits longer, gated against a hyperfine baseline on a busy machine. hyperfine's
export has no CPU time per run, so the gate judges by wall time, and a busy machine's load can
explain a slowdown up to ``1 / (1 - share)``: ``sleep 0.05`` against a baseline of ``sleep 0.01``
read ``inconclusive: ... within what that load can explain (843 %)`` (exit 0), where the same
check against our export failed it (119: ``it waits longer``). That check needs only these runs'
CPU time (``benchmark/gate.py``, ``_waited``), so it applies to a hyperfine baseline too.

The baseline is written by hand in hyperfine's shape, and the CLI's load reading is patched to
say the machine was busy (89 %), so neither this machine's load nor its speed decides the case."""

from __future__ import annotations

import json

from conftest import run_cli

from processkit.benchmark import gate, recorded
from processkit.benchmark.measured import Measured
from processkit.benchmark.plan import Command, Options
from processkit.benchmark.session import Session

BUSY = (
    "processkit.benchmark.host_load",
    "others_share",
    'lambda since: {"others_cpu_share": 0.89, "cpus": 2, "seconds": 1.0, "throttled_share": None, "cpu_quota": None}',
)


def _hyperfine_baseline(tmp_path):
    times = [0.01 * (1 + index / 1000) for index in range(5)]
    mean = sum(times) / len(times)
    result = {"command": "sleep 0.01", "mean": mean, "stddev": 0.0001, "median": times[2], "user": 0.0005}
    result.update(system=0.0008, min=times[0], max=times[-1], times=times, exit_codes=[0] * 5)
    path = tmp_path / "hf.json"
    path.write_text(json.dumps({"results": [result]}))
    return path


class Unaccounted:
    """Every run 50 ms long, its CPU time not measured (a host where it cannot be read)."""

    def __init__(self):
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def measure(self, argv, jsonl, iteration, output):
        self.now += 0.05
        return Measured(50_000_000, None, None, 4096, 0)

    def close(self) -> None:
        pass


def test_a_run_without_cpu_time_says_why_the_wait_was_not_checked(tmp_path):
    """The waits-longer check needs these runs' CPU time: where it is missing, the line says so
    rather than resting on the load alone. A mock executor, as ``test_bench_gate_instructions``."""
    result = Session(
        [Command("sleep 0.01", "sleep 0.05", ("sleep", "0.05"), {})], Options(runs=10), executor=Unaccounted()
    ).run()
    result.settings["host_load"] = {"others_cpu_share": 0.89, "cpus": 2, "seconds": 1.0}
    earlier = recorded.from_json(json.loads(_hyperfine_baseline(tmp_path).read_text()), "hf.json")
    (decided,) = gate.decide(result, earlier, 10.0, "--fail-if-slower 10", "--runs {}".format)
    assert decided.outcome == "inconclusive", decided
    assert "these runs' CPU time was not measured" in decided.reason, decided


def test_a_command_that_waits_longer_fails_against_a_hyperfine_baseline_on_a_busy_machine(tmp_path):
    out = tmp_path / "out.json"
    later = run_cli(
        "bench", "-N", "--runs", "10", "--baseline", _hyperfine_baseline(tmp_path), "--fail-if-slower", "10",
        "--command-name", "sleep 0.01", "sleep 0.05", "--export-json", out,
        cwd=tmp_path, patched=BUSY,
    )  # fmt: skip
    said = later.stdout.decode() + later.stderr.decode()
    (decided,) = json.loads(out.read_text())["gate"]["commands"]
    assert json.loads(out.read_text())["processkit"]["host_load"]["others_cpu_share"] == 0.89  # the patch held
    assert (decided["figure"], decided["outcome"]) == ("wall", "regressed"), decided
    assert "it waits longer (sleep, I/O, a lock)" in decided["reason"], decided
    assert later.returncode == 119, said
    assert "the machine was busy (other processes took 89 %" in said, said
