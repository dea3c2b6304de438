"""The gate decides on instructions where both sides counted them (``benchmark/gate.py``). This
project's machines have no hardware PMU, so the runs come from a mock executor whose counters
say what a host with one would (as ``test_bench_session.py`` mocks times), and the baseline is
an export of ours read back as ``--baseline`` reads it."""

from __future__ import annotations

from processkit.benchmark import gate, recorded
from processkit.benchmark.driver import Measured
from processkit.benchmark.plan import Command, Options
from processkit.benchmark.session import Session

MS = 1_000_000
WORK = 50_000_000  # instructions an unchanged run retires


class Counted:
    """Every run ``wall_ms`` long, retiring ``instructions``, 20 ms of CPU."""

    def __init__(self, wall_ms: float, instructions: int | None):
        self.wall_ms, self.instructions, self.now = wall_ms, instructions, 0.0

    def clock(self) -> float:
        return self.now

    def measure(self, argv, jsonl, iteration, output):
        self.now += self.wall_ms / 1e3
        measured = Measured(round(self.wall_ms * MS), 20 * MS, 0, 4096, 0)
        if output is not None:
            measured.counters = {"instructions": self.instructions, "task_clock_ns": 20 * MS}
        return measured

    def close(self) -> None:
        pass


def result_of(wall_ms: float, instructions: int | None, share: float):
    executor = Counted(wall_ms, instructions)
    command = [Command("work", "work", ("work",), {})]
    result = Session(command, Options(runs=10), executor=executor).run()
    result.settings["host_load"] = {"others_cpu_share": share, "cpus": 2, "seconds": 1.0}
    return result


def baseline(instructions: int | None):
    return recorded.from_json(result_of(20, instructions, 0.0).to_json(), "base.json")


def decided(current, earlier):
    (decision,) = gate.decide(current, earlier, 5.0, "--fail-if-slower 5")
    return decision


def test_instructions_decide_where_both_sides_counted_them():
    earlier = baseline(WORK)
    assert earlier.commands[0].instructions == [WORK] * 10
    busy_same = decided(result_of(60, WORK, 0.9), earlier)  # three times the wall time, same work
    assert (busy_same.figure, busy_same.outcome) == ("instructions", "passed")
    assert "instructions retired" in busy_same.reason
    more = decided(result_of(20, WORK * 3 // 2, 0.0), earlier)  # half as much work again, quiet
    assert (more.figure, more.outcome) == ("instructions", "regressed") and more.change_percent > 40


def test_a_host_without_the_counter_falls_back_to_time():
    earlier = baseline(None)
    assert earlier.commands[0].instructions is None  # null in the export, never zeros
    busy = decided(result_of(60, None, 0.9), earlier)
    assert busy.figure == "cpu" and busy.outcome == "passed"  # same CPU time, three times the wall
    quiet = decided(result_of(60, None, 0.0), earlier)
    assert quiet.figure == "wall" and quiet.outcome == "regressed"
