"""The gate wrote a change that rounds to nothing as ``0.0 %`` (``0 %`` for the timeouts'
``at least``), true of no change it judged: a regression beyond ``--fail-if-slower 0`` read
``is 0.0 % slower``, and a passing command ``no significant change: 0.0 % by the fastest run's
CPU time`` with no direction. Such a change is now ``<0.1 %`` (``<1 %``) and keeps its direction;
only a change of exactly nothing is ``0.0 %``."""

from __future__ import annotations

import json

from conftest import run_cli

from processkit.benchmark import baseline, gate, recorded
from processkit.benchmark.driver import Measured
from processkit.benchmark.plan import Command, Options
from processkit.benchmark.session import Session
from processkit.benchmark.stats import summarize

RUNS = 3
# Its first run hangs (no marker yet) until --timeout ends it; the others end at once.
HANGS_ONCE = ["sh", "-c", "test -e marker && exit 0; touch marker; exec sleep 3600"]
TIMEOUT_S = 0.1
MEDIAN_S = 0.09997  # the baseline's: the timeout is 0.03 % over it


def test_a_timeouts_change_that_rounds_to_nothing_is_said_as_under_its_precision(tmp_path):
    baseline = tmp_path / "base.json"  # every run MEDIAN_S long, on a quiet machine
    baseline.write_text(json.dumps(_result(1.0, 0.0, wall_s=MEDIAN_S, name="hang").to_json()))
    export = tmp_path / "new.json"
    done = run_cli(
        "bench", "--runs", str(RUNS), "--timeout", f"{TIMEOUT_S * 1000:g}ms", "--ignore-failure", "--style", "basic",
        "-n", "hang", "--baseline", baseline, "--fail-if-slower", "0", "--export-json", export,
        "--command", json.dumps(HANGS_ONCE), cwd=tmp_path,
    )  # fmt: skip
    (decision,) = json.loads(export.read_text())["gate"]["commands"]
    assert 0 < decision["change_percent"] < 0.05, decision
    # regressed on a quiet machine (119), inconclusive where the others' load can explain it (0)
    assert (done.returncode, decision["outcome"]) in ((119, "regressed"), (0, "inconclusive")), done.stderr
    said = done.stdout.decode()
    assert "each took at least <1 % longer than the baseline's median" in said, said
    assert "at least 0 % longer" not in said and " 0.0 % slower" not in said, said
    if decision["outcome"] == "regressed":
        assert "'hang' is <0.1 % slower than the baseline" in said, said


class Burns:
    """Every run ``wall_s`` of wall time and ``cpu_ms`` of CPU time (a mock executor, as
    test_bench_gate_instructions.py's: figures this exact are no real run's)."""

    def __init__(self, cpu_ms: float, wall_s: float):
        self.cpu_ms, self.wall_s, self.now = cpu_ms, wall_s, 0.0

    def clock(self) -> float:
        return self.now

    def measure(self, argv, jsonl, iteration, output):
        self.now += self.wall_s
        return Measured(round(self.wall_s * 1e9), 0, 0, 4096, 0, tree_cpu_ns=round(self.cpu_ms * 1e6))

    def close(self) -> None:
        pass


def _result(cpu_ms: float, share: float, wall_s: float = 0.03, name: str = "work"):
    command = Command(name, name, (name,), {})
    result = Session([command], Options(runs=10), executor=Burns(cpu_ms, wall_s)).run()
    result.settings["host_load"] = {"others_cpu_share": share, "cpus": 2, "seconds": 1.0}
    return result


def test_a_fastest_runs_change_that_rounds_to_nothing_keeps_its_direction():
    earlier = recorded.from_json(_result(20.0, 0.0).to_json(), "base.json")
    (decision,) = gate.decide(
        _result(20.004, 0.9), earlier, 5.0, "--fail-if-slower 5", "--runs {}".format
    )  # busy: by CPU time
    assert decision.outcome == "passed" and decision.figure == "cpu", decision
    assert decision.reason.startswith("<0.1 % slower by the fastest run's CPU time, within --fail-if-slower 5 %"), (
        decision.reason
    )
    (same,) = gate.decide(_result(20.0, 0.9), earlier, 5.0, "--fail-if-slower 5", "--runs {}".format)
    assert ": 0.0 % by the fastest run's CPU time" in same.reason, same.reason  # exactly nothing


def test_a_size_that_formats_as_nothing_is_under_the_precision_even_at_half_of_it():
    # Python formats a half to even: 0.5 to no places is "0", 0.05 to one "0.1" (0.05 is over it in binary)
    assert [baseline.shown_change(size, 0) for size in (0.5, -0.5, 0.49, 0.51, 1.5)] == ["<1", "<1", "<1", "1", "2"]
    assert [baseline.shown_change(size) for size in (0.04, -0.04, 0.05, 0.25)] == ["<0.1", "<0.1", "0.1", "0.2"]
    assert baseline.shown_change(0.0) == "0.0" and baseline.shown_change(-0.0, 0) == "0"  # exactly nothing


def test_the_baseline_blocks_change_that_rounds_to_nothing_keeps_its_direction():
    # 10 runs of 0.030006 s against 10 of 0.03 s: significantly slower by 0.02 %
    (entry,) = baseline.against(_samples(0.030006), _samples(0.03), "base.json", "wall").commands
    assert entry.verdict == baseline.SLOWER, entry
    assert "(<0.1 % slower by the mean, Mann-Whitney U p = " in baseline.describe(entry), baseline.describe(entry)
    (entry,) = baseline.against(_samples(0.03), _samples(0.030006), "base.json", "wall").commands
    assert "(<0.1 % faster by the mean, Mann-Whitney U p = " in baseline.describe(entry), baseline.describe(entry)


def _samples(wall_s: float) -> list[tuple]:
    """One command's 10 runs of ``wall_s`` each, as ``baseline.against`` pairs them."""
    times = [wall_s] * 10
    return [("work", "work", summarize(times, [], [], []), times, (0, len(times)))]
