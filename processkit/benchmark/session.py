"""Running a benchmark: setup, warm-up, the timed runs in their order, cleanup.

Interleaved (the default) runs one round after another, each round running every command that
still needs runs once, so drift (thermal, other load) hits every command alike; sequential runs
all of a command's runs before the next. The number of timed runs per command is fixed by
``--runs``, else re-estimated after each run from the command's mean cycle so far (a run with
its ``--prepare`` and the runner's set-up and teardown, so ``--min-time`` is the time the
benchmark of that command takes): at least ``--min-runs``, enough to fill ``--min-time``, at
most ``--max-runs``. ``--prepare`` runs before every run (warm-up and timed), untimed;
``--setup`` once per command before its warm-up, ``--cleanup`` once per command after its last
run. Sequential order gives each command its setup, warm-up, runs and cleanup in turn;
interleaved order does each of those steps for all commands, then the next step.

Every run, timed or not, goes through the session's executor (``driver.Engine``: contained, in
this process, every run on one host; a test's mock in its place). A timed run gets hyperfine's
``HYPERFINE_ITERATION`` (``0``, ``1``, ... per command; ``warmup-0``, ... for warm-up runs; none
for the setup, prepare and cleanup commands). A failing timed run stops the benchmark unless
failures are ignored; a timed-out one is kept aside (not in the statistics) with a count; a stop
signal stops the benchmark. ``finished`` hears the result of every command whose runs are all
done, as each one is (the exports are rewritten from it), so what was measured before a failure
or a Ctrl-C is kept.
"""

from __future__ import annotations

import os

from ..errors import Failure, Kind
from ..text import sanitize
from . import driver
from .plan import Command, Options, Order, substitute
from .result import BenchResult, CommandResult, TimedRun

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .driver import Executor

    Progress = Callable[[int, "list[TimedRun]", int, float], None]


class Session:
    def __init__(
        self,
        commands: list[Command],
        options: Options,
        progress: Progress | None = None,
        executor: Executor | None = None,
        finished: Callable[[BenchResult], None] | None = None,
    ):
        self.commands = commands
        self.options = options
        self.progress = progress  # (command index, its timed runs so far, its target, its time spent)
        self.executor = executor  # None: the engine, made when the session runs
        self.finished = finished  # the result of the commands done so far, after each one
        self.done: list[int] = []  # the commands whose runs are all done, in the order they were
        self.runs: list[list[TimedRun]] = [[] for _ in commands]
        self.warmups: list[list[float | None]] = [[] for _ in commands]  # their times (None: timed out)
        self.targets: list[int | None] = [options.runs for _ in commands]
        self.spent = [0.0 for _ in commands]  # seconds each command's timed runs took in all
        self.leftovers = [0 for _ in commands]  # processes its runs left outside their boundary
        self.order = 0

    def run(self) -> BenchResult:
        opts = self.options
        previous = _pin(opts.cpus)
        try:
            if self.executor is None:
                self.executor = driver.Engine(opts)
            everything = list(range(len(self.commands)))
            groups = [everything] if opts.order is Order.INTERLEAVED else [[index] for index in everything]
            for indices in groups:
                self._benchmark(indices)
        finally:
            try:
                if self.executor is not None:
                    self.executor.close()
            finally:
                if previous is not None:
                    os.sched_setaffinity(0, previous)
        return self.result(range(len(self.commands)))

    def result(self, indices) -> BenchResult:
        """The result of these commands as their runs stand."""
        results = [CommandResult(self.commands[i], self.runs[i], self.warmups[i], self.leftovers[i]) for i in indices]
        return BenchResult(results, settings(self.options))

    def _benchmark(self, indices: list[int]) -> None:
        """These commands from setup to cleanup, their runs in rounds (one command: in a row)."""
        opts = self.options
        for index in indices:
            self._auxiliary(opts.setup, "--setup", index)
        for round_ in range(opts.warmup):
            for index in indices:
                self._warmup(index, round_)
        while any(self._wants(index) for index in indices):
            for index in indices:
                if self._wants(index):
                    self._timed(index)
                    if not self._wants(index):
                        self._command_done(index)
        for index in indices:
            self._auxiliary(opts.cleanup, "--cleanup", index)

    def _command_done(self, index: int) -> None:
        self.done.append(index)
        if self.finished is not None:
            self.finished(self.result(sorted(self.done)))

    def _wants(self, index: int) -> bool:
        target = self.targets[index]
        return target is None or len(self.runs[index]) < target

    def _jsonl(self, index: int, what: str) -> str | None:
        directory = self.options.jsonl_dir
        return None if directory is None else os.path.join(directory, f"command-{index + 1}-{what}.jsonl")

    def _auxiliary(self, argv: tuple[str, ...] | None, flag: str, index: int) -> None:
        """A setup, cleanup or prepare command: contained, untimed, and it must succeed."""
        if argv is None:
            return
        values = self.commands[index].parameters
        argv = tuple(substitute(arg, values) for arg in argv)
        measured = self._measure(index, argv, None, None)
        _stop_if_cancelled(measured)
        if measured.error is not None or measured.exit_code != 0:
            why = measured.error or f"exited with {measured.exit_code}"
            raise Failure(Kind.BENCH_FAILED, f"the {flag} command {sanitize(' '.join(argv))!r} failed: {why}")

    def _warmup(self, index: int, round_: int) -> None:
        measured = self._run(index, f"warmup-{round_ + 1}", f"warmup-{round_}")
        self.warmups[index].append(measured.wall_ns / 1e9 if measured.wall_ns is not None else None)

    def _run(self, index: int, what: str, iteration: str) -> driver.Measured:
        """One run of a command, after its ``--prepare``; stops the benchmark where it must."""
        command = self.commands[index]
        self._auxiliary(self.options.prepare, "--prepare", index)
        measured = self._measure(index, command.argv, self._jsonl(index, what), iteration)
        self._check(command, measured)
        return measured

    def _measure(self, index: int, argv: tuple[str, ...], jsonl: str | None, iteration: str | None) -> driver.Measured:
        assert self.executor is not None, "made when the session runs"
        measured = self.executor.measure(argv, jsonl, iteration)
        self.leftovers[index] += measured.leftovers
        return measured

    def _timed(self, index: int) -> None:
        runs = self.runs[index]
        assert self.executor is not None, "made when the session runs"
        clock = self.executor.clock
        started = clock()
        measured = self._run(index, f"run-{len(runs) + 1}", str(len(runs)))
        cycle = clock() - started  # the run with its --prepare and the runner's own work
        wall = measured.wall_ns / 1e9 if measured.wall_ns is not None else None
        runs.append(
            TimedRun(
                order=self.order,
                wall=wall,
                user=measured.user_ns / 1e9,
                system=measured.system_ns / 1e9,
                memory=measured.peak_memory_bytes,
                exit_code=measured.exit_code,
                timed_out=measured.timed_out,
            )
        )
        self.order += 1
        self.spent[index] += cycle
        if self.options.runs is None:  # re-estimated after every run, from the mean cycle so far
            self.targets[index] = max(len(runs), self.options.run_count(self.spent[index] / len(runs)))
        if self.progress is not None:
            self.progress(index, runs, self.targets[index] or len(runs), self.spent[index])

    def _check(self, command: Command, measured: driver.Measured) -> None:
        _stop_if_cancelled(measured)
        if measured.timed_out:
            return
        if measured.exit_code is None:  # the runner could not run it at all: nothing to ignore
            raise Failure(Kind.BENCH_FAILED, f"cannot benchmark {sanitize(command.name)!r}: {measured.error}")
        if measured.exit_code != 0 and not self.options.ignore_failure:
            raise Failure(
                Kind.BENCH_FAILED,
                f"the command {sanitize(command.name)!r} exited with {measured.exit_code}; "
                "use --ignore-failure to benchmark it anyway",
            )


def settings(opts: Options) -> dict:
    """The options that shaped the runs, as the JSON export records them."""
    return {
        "order": opts.order.value,
        "metric": opts.metric,
        "cpus": list(opts.cpus) if opts.cpus is not None else None,
        "timeout_ms": opts.timeout_ms,
        "warmup": opts.warmup,
        "ignore_failure": opts.ignore_failure,
        "timed_interval": "spawn to reap, monotonic ns",
    }


def _stop_if_cancelled(measured: driver.Measured) -> None:
    if measured.cancelled:
        raise Failure(Kind.CANCELLED, f"benchmark stopped: {measured.error}")


def _pin(cpus: tuple[int, ...] | None) -> set[int] | None:
    """Pin this process, and so every run it starts, to ``cpus``; the previous set to restore."""
    if cpus is None:
        return None
    previous = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot pin to --cpus {','.join(map(str, cpus))}: {exc.strerror}") from None
    return previous


def shortfall(result: BenchResult, options: Options) -> Failure | None:
    """The benchmark's failure once every run is done, if it failed: a command none of whose
    runs finished, or (a run ended by ``--timeout`` is left out) one with fewer finished runs
    than ``--runs``/``--min-runs`` asks for, unless failures are ignored."""
    for command_result in result.results:
        if command_result.summary is None:
            return Failure(Kind.BENCH_FAILED, f"every run of {sanitize(command_result.command.name)!r} timed out")
    needed, flag = (options.runs, "--runs") if options.runs is not None else (options.min_runs, "--min-runs")
    if options.ignore_failure:
        return None
    for command_result in result.results:
        finished = len(command_result.measured)
        if command_result.timed_out and finished < needed:
            return Failure(
                Kind.BENCH_FAILED,
                f"only {finished} of {len(command_result.runs)} runs of {sanitize(command_result.command.name)!r} "
                f"finished within --timeout, fewer than {flag} {needed}; use --ignore-failure to accept them",
            )
    return None
