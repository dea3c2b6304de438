"""A run whose CPU time no counter measured (null: a process-group run whose runner collected a
child of no group of its meanwhile, ``accounting.ChildrenUsage``; a counter's read error) stays
unmeasured in ``bench``: never a 0 that the statistics, the exports and the gate take as a figure."""

from __future__ import annotations

from types import SimpleNamespace

from processkit.benchmark import gate, recorded
from processkit.benchmark.driver import Measured
from processkit.benchmark.measured import measured_from
from processkit.benchmark.plan import Command, Options
from processkit.benchmark.session import Session
from processkit.containment.accounting import Usage

MS = 1_000_000


def test_a_null_cpu_figure_is_no_zero():
    outcome = SimpleNamespace(
        usage=Usage(peak_memory_bytes=4096),  # CPU null: not accounted for
        command_from_ns=None,
        started_ns=0,
        ended_ns=5 * MS,
        failure=None,
        code=0,
        max_rss_bytes=None,
    )
    measured = measured_from(outcome)  # type: ignore[arg-type]
    assert (measured.user_ns, measured.system_ns, measured.wall_ns) == (None, None, 5 * MS)


class Executor:
    """Each run 10 ms of wall time and 5 ms of CPU time, but ``unmeasured``'s runs by number,
    whose CPU no counter gave."""

    def __init__(self, unmeasured: set[int]):
        self.unmeasured, self.runs, self.now = unmeasured, 0, 0.0

    def clock(self) -> float:
        return self.now

    def measure(self, argv, jsonl, iteration, output):
        self.now += 0.01
        self.runs += 1
        cpu = None if self.runs in self.unmeasured else 4 * MS
        return Measured(10 * MS, cpu, cpu and MS, 4096, 0)

    def close(self) -> None:
        pass


def bench(unmeasured: set[int]):
    command = Command("a", "a", ("a",), {})
    return Session([command], Options(runs=4), executor=Executor(unmeasured)).run()


def test_a_command_with_a_run_unmeasured_has_no_cpu_figure_and_the_gate_no_verdict_by_it():
    result = bench({2})
    (command,) = result.results
    assert command.cpu_times == [] and command.cpu_summary is None
    record = result.to_json()["results"][0]
    assert record["user_times"][1] is None and record["cpu"] is None
    assert record["user"] == 0.004  # the mean over the runs measured, not pulled down by a 0
    earlier = recorded.from_json(bench(set()).to_json(), "base.json")
    assert earlier.commands[0].cpu_times is not None
    # the baseline read back from an export holding a null keeps that run unmeasured too
    assert recorded.from_json(result.to_json(), "new.json").commands[0].cpu_times is None
    result.metric = "cpu"
    (decision,) = gate.decide(result, earlier, 5.0, "--fail-if-slower")
    assert decision.outcome == gate.INCONCLUSIVE and decision.figure == "cpu", decision
