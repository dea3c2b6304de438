"""The benchmark session against a mock executor: run counts, warm-up, order, outliers, failure,
timeout and stop handling, with times, exit codes and timeouts the test chooses; no process is
started (hyperfine's ``MockExecutor`` plays this part in its own tests)."""

from __future__ import annotations

import pytest

from processkit.benchmark import printout
from processkit.benchmark.driver import Measured
from processkit.benchmark.plan import Command, Options, Order
from processkit.benchmark.session import Session
from processkit.benchmark.shortfall import shortfall
from processkit.errors import Failure

MS = 1_000_000


class Mock:
    """An executor whose every run is what ``script(name, iteration, nth)`` says: a wall time
    in ms, ``("exit", code, ms)``, ``"timeout"`` or ``"cancelled"``. Its clock advances by each
    run's time plus ``overhead_ms``, so ``--min-time`` decisions are exact."""

    def __init__(self, script, overhead_ms: float = 0.0, timeout_ms: float = 100.0):
        self.script = script
        self.overhead_ms = overhead_ms
        self.timeout_ms = timeout_ms
        self.now = 0.0
        self.calls: list[tuple[str, str | None]] = []
        self.outputs: list[str | None] = []  # what each run's output was to be (None: a step's)
        self.closed = False

    def clock(self) -> float:
        return self.now

    def measure(self, argv, jsonl, iteration, output):
        name = argv[0]
        nth = sum(1 for called, _ in self.calls if called == name)
        self.calls.append((name, iteration))
        self.outputs.append(output)
        said = self.script(name, iteration, nth)
        if said == "timeout":
            self.now += (self.timeout_ms + self.overhead_ms) / 1e3
            return Measured(None, 0, 0, None, None, timed_out=True, error="timed out")
        if said == "cancelled":
            return Measured(None, 0, 0, None, None, cancelled=True, error="cancelled by ctrl_c")
        code, ms = (said[1], said[2]) if isinstance(said, tuple) else (0, said)
        self.now += (ms + self.overhead_ms) / 1e3
        return Measured(round(ms * MS), round(ms * MS / 2), round(ms * MS / 4), 4096, code)

    def close(self) -> None:
        self.closed = True


def commands(*names: str, **steps) -> list[Command]:
    return [Command(name, name, (name,), {}, **steps) for name in names]


def constant(ms: float):
    return lambda name, iteration, nth: ms


def run(names, options: Options, mock: Mock, finished=None, **steps):
    return Session(commands(*names, **steps), options, executor=mock, finished=finished).run()


def test_fixed_runs_and_warmup_set_the_iteration_as_hyperfine_does():
    mock = Mock(constant(10))
    result = run(["a"], Options(runs=3, warmup=2), mock)
    assert mock.calls == [("a", "warmup-0"), ("a", "warmup-1"), ("a", "0"), ("a", "1"), ("a", "2")]
    (only,) = result.results
    assert only.times == [0.01] * 3 and only.warmups == [0.01, 0.01]
    assert only.summary.user == 0.005 and only.summary.system == 0.0025 and mock.closed


def test_min_time_decides_the_count_between_min_and_max_runs():
    mock = Mock(constant(100))  # 0.1 s a run: 1 s of --min-time takes 10 runs
    assert len(run(["a"], Options(min_runs=2, min_time_s=1.0), mock).results[0].times) == 10
    mock = Mock(constant(100), overhead_ms=100)  # the cycle counts the runner's own work: 5 runs
    assert len(run(["a"], Options(min_runs=2, min_time_s=1.0), mock).results[0].times) == 5
    mock = Mock(constant(100))
    assert len(run(["a"], Options(min_runs=2, min_time_s=1.0, max_runs=4), mock).results[0].times) == 4
    mock = Mock(constant(100))
    assert len(run(["a"], Options(min_runs=30, min_time_s=1.0), mock).results[0].times) == 30


def test_the_estimate_follows_the_mean_cycle_so_far():
    """Two fast runs promise 200 in 2 s; then every run takes 0.5 s, the estimate is made again
    after each, and the benchmark ends at the first count whose runs fill the 2 s: six."""
    mock = Mock(lambda name, iteration, nth: 10 if nth < 2 else 500)
    times = run(["a"], Options(min_runs=2, min_time_s=2.0), mock).results[0].times
    assert times == [0.01, 0.01, 0.5, 0.5, 0.5, 0.5]


def test_interleaved_and_sequential_orders():
    mock = Mock(constant(1))
    result = run(["a", "b"], Options(runs=2, warmup=1), mock)
    assert [name for name, _ in mock.calls] == ["a", "b", "a", "b", "a", "b"]
    assert [[r.order for r in c.runs] for c in result.results] == [[0, 2], [1, 3]]
    mock = Mock(constant(1))
    result = run(["a", "b"], Options(runs=2, warmup=1, order=Order.SEQUENTIAL), mock)
    assert [name for name, _ in mock.calls] == ["a", "a", "a", "b", "b", "b"]
    assert [[r.order for r in c.runs] for c in result.results] == [[0, 1], [2, 3]]


def test_setup_prepare_conclude_and_cleanup_get_no_iteration_and_must_succeed():
    mock = Mock(constant(1))
    steps = {"setup": ("setup",), "prepare": ("prepare",), "conclude": ("conclude",), "cleanup": ("cleanup",)}
    run(["a"], Options(runs=2), mock, **steps)
    assert mock.calls == [
        ("setup", None), ("prepare", None), ("a", "0"), ("conclude", None),
        ("prepare", None), ("a", "1"), ("conclude", None), ("cleanup", None),
    ]  # fmt: skip
    assert mock.outputs == [None, None, "pipe", None, None, "pipe", None, None]  # only the command's runs get --output
    mock = Mock(lambda name, iteration, nth: ("exit", 1, 1) if name == "prepare" else 1)
    with pytest.raises(Failure) as raised:
        run(["a"], Options(runs=2), mock, **steps)
    assert raised.value.code == 118 and "preparation command 'prepare'" in raised.value.message and mock.closed


def test_the_shell_calibration_runs_on_the_executor_and_is_taken_off_shell_commands():
    """hyperfine's correction: ``sh -c ''`` measured 50 times, through the same executor as
    every run, before the first; its mean is charged off a shell command's runs only."""
    mock = Mock(lambda name, iteration, nth: 2 if name == "sh" else 10)
    shelled = [Command("a", "a", ("a",), {}, shell=True), Command("b", "b", ("b",), {})]
    result = Session(shelled, Options(runs=2, shell=("sh",)), executor=mock).run()
    assert mock.calls[:50] == [("sh", None)] * 50 and len(mock.calls) == 54
    shell_run, plain_run = result.results
    assert shell_run.times == [pytest.approx(0.008)] * 2 and plain_run.times == [0.01, 0.01]
    assert result.settings["shell_startup"]["runs"] == 50
    mock = Mock(lambda name, iteration, nth: ("exit", 127, 1) if name == "sh" else 10)
    with pytest.raises(Failure) as raised:
        Session(shelled, Options(runs=2, shell=("sh",)), executor=mock).run()
    assert "could not measure the shell's start-up (sh -c '')" in raised.value.message and mock.closed


def test_an_outlier_is_flagged_and_warned_about():
    mock = Mock(lambda name, iteration, nth: 50 if nth == 5 else 10 + nth % 2)
    result = run(["a"], Options(runs=10), mock)
    (only,) = result.results
    assert only.outliers == [5]
    assert any("1 statistical outlier" in line for line in printout.warnings(only))


def test_a_failing_run_stops_the_benchmark_unless_failures_are_ignored():
    failing = lambda name, iteration, nth: ("exit", 3, 5) if nth == 1 else 5  # noqa: E731
    mock = Mock(failing)
    with pytest.raises(Failure) as raised:
        run(["a"], Options(runs=3), mock)
    assert raised.value.code == 118 and "exited with 3" in raised.value.message
    assert len(mock.calls) == 2 and mock.closed
    result = run(["a"], Options(runs=3, ignore_failure=True), Mock(failing))
    assert [r.exit_code for r in result.results[0].runs] == [0, 3, 0]


def test_timed_out_runs_are_left_out_counted_and_can_fail_the_benchmark():
    every_other = lambda name, iteration, nth: "timeout" if nth % 2 else 10  # noqa: E731
    options = Options(runs=4, timeout_ms=100)
    result = run(["a"], options, Mock(every_other))
    (only,) = result.results
    assert only.timed_out == 2 and only.times == [0.01, 0.01] and only.summary.runs == 2
    assert any("2 of 4 runs of 'a' timed out" in line for line in printout.warnings(only))
    failure = shortfall(result, options)
    assert failure is not None and failure.code == 118 and "fewer than --runs 4" in failure.message
    assert shortfall(result, Options(runs=4, timeout_ms=100, ignore_failure=True)) is None
    one_of_four = lambda name, iteration, nth: "timeout" if nth == 0 else 10  # noqa: E731
    result = run(["a"], Options(runs=4, timeout_ms=100), Mock(one_of_four))
    assert not any("timed out" in line for line in printout.warnings(result.results[0]))
    result = run(["a"], Options(runs=2, timeout_ms=100), Mock(lambda *_: "timeout"))
    failure = shortfall(result, Options(runs=2, timeout_ms=100, ignore_failure=True))
    assert result.results[0].summary is None and "every run of 'a' timed out" in failure.message


def test_a_stop_signal_stops_the_benchmark_and_closes_the_executor():
    mock = Mock(lambda name, iteration, nth: "cancelled" if nth == 2 else 1)
    with pytest.raises(Failure) as raised:
        run(["a"], Options(runs=5), mock)
    assert raised.value.code == 107 and len(mock.calls) == 3 and mock.closed


def test_each_finished_command_is_handed_on_as_it_finishes():
    """Sequential: after each command; a failure in the third leaves the first two handed on."""
    heard: list[list[str]] = []
    failing_c = lambda name, iteration, nth: ("exit", 1, 1) if name == "c" else 1  # noqa: E731
    finished = lambda result: heard.append([r.command.name for r in result.results])  # noqa: E731
    with pytest.raises(Failure):
        run(["a", "b", "c"], Options(runs=2, order=Order.SEQUENTIAL), Mock(failing_c), finished)
    assert heard == [["a"], ["a", "b"]]
    heard.clear()
    uneven = lambda name, iteration, nth: 1 if name == "a" else 100  # noqa: E731
    run(["a", "b"], Options(min_runs=2, min_time_s=0.5), Mock(uneven), finished)
    assert heard == [["b"], ["a", "b"]]  # interleaved: b needs fewer runs, so it finishes first
