"""Running a benchmark: setup, warm-up, the timed runs in their order, cleanup.

Interleaved (the default) runs one round after another, each round running every command that
still needs runs once, so drift (thermal, other load) hits every command alike; sequential runs
all of a command's runs before the next. The number of timed runs per command is fixed by
``--runs``, else re-estimated after each run from the command's mean cycle so far (a run with
its ``--prepare`` and the runner's set-up and teardown, so ``--min-time`` is the time the
benchmark of that command takes): at least ``--min-runs``, enough to fill ``--min-time``, at
most ``--max-runs``. ``--prepare`` runs before every run (warm-up and timed), ``--conclude``
after it, untimed; ``--setup`` once per command before its warm-up, ``--cleanup`` after its
last run. Sequential order gives each command its steps in turn; interleaved order does each
step for all commands, then the next.

Every run, timed or not, goes through the session's executor (``driver.Engine``: contained, in
this process, every run on one host; a test's mock in its place). A timed run gets hyperfine's
``HYPERFINE_ITERATION`` (``0``, ``1``, ... per command; ``warmup-0``, ... for warm-up runs; none
for the setup, prepare, conclude and cleanup commands). A failing timed run stops the benchmark
unless failures are ignored; a timed-out one is kept aside (not in the statistics) with a count;
a stop signal stops the benchmark. ``finished`` hears the result of every command whose runs are
all done, as each one is (the exports are rewritten from it), and of every command's runs so far
when a failure or a Ctrl-C comes amid interleaved rounds, so what was measured is kept. A
command run in a row (sequential order, or the only command) is told to ``starts`` as its steps
begin and to ``over`` once it is over (its cleanup done, or the benchmark failing or stopped
after its runs), so its ``Benchmark N:`` line is printed first and the rest of its block then,
as hyperfine does; a stop's line names the command whose steps went on.

Shell commands are charged less the shell's own start-up, as hyperfine does: before the
benchmark ``SHELL -c ''`` is measured CALIBRATION_RUNS times (on the same executor as every
run) and its mean wall, user and system time are taken off each run of every command that runs
through the shell (never below 0).
"""

from __future__ import annotations

import os

from ..diagnostics import warn
from ..errors import Failure, Kind
from ..plain import Plain
from ..text import plural, quoted, sanitize
from . import driver, failed, host_load
from .plan import Command, Options, Order
from .result import BenchResult, CommandResult, TimedRun
from .stats import fmean

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .driver import Executor
    from .progress import ProgressBars

CALIBRATION_RUNS = 50  # as hyperfine
# What a run's time covers (the export's ``timed_interval``; ``driver``, ``exit_clock``)
INTERVAL = "the child's first step to the root's exit (the kernel's record), less its joining its cgroups, monotonic ns"


def _mean_s(figures: list[int | None]) -> float | None:
    """The mean in seconds of the nanosecond figures measured; None where none was (then
    nothing is taken off)."""
    measured = [ns for ns in figures if ns is not None]
    return fmean(measured) / 1e9 if measured else None


class Startup(Plain):
    """The shell's own start-up, as measured: what each shell command's run is charged less.
    ``user``/``system``: the root's rusage (hyperfine's); ``cpu``: the tree's user+system (ours)."""

    __slots__ = ("command", "wall", "user", "system", "runs", "cpu")

    def __init__(
        self, command: str, wall: float, user: float | None, system: float | None, runs: int, cpu: float | None = None
    ):
        self.command = command
        self.wall = wall
        self.user = user  # None: no calibration run's CPU was measured (null in the export, never a 0)
        self.system = system
        self.runs = runs
        self.cpu: float | None = cpu  # the tree's, None where no run's was measured

    def to_json(self) -> dict:
        figures = {"wall": self.wall, "user": self.user, "system": self.system, "cpu": self.cpu}
        return {"command": self.command, **figures, "runs": self.runs}


class Session:
    def __init__(
        self,
        commands: list[Command],
        options: Options,
        progress: ProgressBars | None = None,
        executor: Executor | None = None,
        finished: Callable[[BenchResult], None] | None = None,
        stop_fd: int | None = None,
        over: Callable[[BenchResult, int], None] | None = None,
        starts: Callable[[BenchResult, int], None] | None = None,
    ):
        self.commands = commands
        self.stop_fd = stop_fd  # the engine stops once a stop is written to it (``engine.stopfd``)
        self.options = options
        self.progress = progress  # told before and after each run, and ticked while one runs
        self.tick = progress.tick if progress is not None else None
        self.executor = executor  # None: the engine, made when the session runs
        self.finished = finished  # the result of the commands done so far, after each one
        self.over = over  # a command run in a row: its index once it is over, with the results so far
        self.starts = starts  # a command run in a row: its index as its steps begin, with the results so far
        self.running: int | None = None  # the command whose steps go on (a stop's line names it)
        self.done: list[int] = []  # the commands whose runs are all done, in the order they were
        self.runs: list[list[TimedRun]] = [[] for _ in commands]
        self.warmups: list[list[float | None]] = [[] for _ in commands]  # their times (None: timed out)
        self.targets: list[int | None] = [options.runs for _ in commands]
        self.spent = [0.0 for _ in commands]  # seconds each command's timed runs took in all
        self.leftovers = [0 for _ in commands]  # processes its runs left outside their boundary
        self.floors = [host_load.RssFloor() for _ in commands]  # bench's own resident set around its runs
        self.order = 0
        self.shell_startup: Startup | None = None
        self.load_since: host_load.Sample | None = None  # the host's load is measured from here

    def run(self) -> BenchResult:
        opts = self.options
        previous = host_load.pin(opts.cpus, opts.named)
        try:
            if self.executor is None:
                ahead = not any(command.prepare or command.conclude for command in self.commands)
                self.executor = driver.Engine(opts, tick=self.tick, stop_fd=self.stop_fd, ahead=ahead)
            everything = list(range(len(self.commands)))
            groups = [everything] if opts.order is Order.INTERLEAVED else [[index] for index in everything]
            self._calibrate()
            self.load_since = host_load.start()
            for indices in groups:
                try:
                    self._started(indices)
                    self._benchmark(indices)
                except Failure:  # amid interleaved rounds, no command done yet: the runs so far are kept
                    if len(indices) > 1:  # one command (or sequential order): nothing it finished
                        self._keep_so_far(indices)
                    else:
                        self._left_out(indices[0])
                    self._ended(indices)
                    raise
                self._ended(indices)
                self.running = None
        finally:
            try:
                if self.executor is not None:
                    self.executor.close()
            finally:
                if previous is not None:
                    os.sched_setaffinity(0, previous)
        self._stop_if_signalled()  # after the close, which dispatches a stop caught during it
        return self.result(range(len(self.commands)))

    def _started(self, indices: list[int]) -> None:
        """A command run in a row (sequential order, or the only one) begins: ``starts`` hears of it
        before its setup, as hyperfine prints its ``Benchmark N:`` line. Interleaved rounds of
        several commands have no such moment: their blocks come whole at the end."""
        if len(indices) == 1:
            self.running = indices[0]
            if self.starts is not None:
                self.starts(self.result(range(indices[0] + 1)), indices[0])

    def _ended(self, indices: list[int]) -> None:
        """A command run in a row is over once its cleanup is done, or once the benchmark
        fails after its runs were (its cleanup's failure, a stop): ``over`` hears of it then."""
        index = indices[0]
        if self.over is not None and len(indices) == 1 and index in self.done:
            self.over(self.result(range(index + 1)), index)

    def _keep_so_far(self, indices: list[int]) -> None:
        """Every command's runs so far to ``finished``; the failure that stopped the rounds stays the
        benchmark's (a Ctrl-C still dies by SIGINT): an export that cannot be written then is warned of."""
        if self.finished is None:
            return
        try:
            self.finished(self.result(sorted({*self.done, *(i for i in indices if self.runs[i])})))
        except Failure as unwritten:
            warn(unwritten.message)

    def _left_out(self, index: int) -> None:
        """A command stopped amid its runs in a row (the only one, or sequential order): said, as
        hyperfine's exports have it only once its runs are done, so theirs are not taken for all."""
        if self.finished is not None and self.runs[index] and index not in self.done:
            runs = plural(len(self.runs[index]), "timed run")
            name = quoted(self.commands[index].name)
            warn(f"the exports leave out {name} and its {runs} so far: a command goes there once its runs are done")

    def result(self, indices) -> BenchResult:
        """The result of these commands as their runs stand."""
        results = [CommandResult(self.commands[i], self.runs[i], self.warmups[i], self.leftovers[i]) for i in indices]
        for i, command_result in zip(indices, results):
            command_result.rss_floor = self.floors[i]
        load = host_load.others_share(self.load_since) if self.load_since is not None else None
        missing = getattr(self.executor, "counters_missing", None)  # a test's executor counts nothing
        result = BenchResult(results, settings(self.options, self.shell_startup, load, missing))
        result.settings.update(host_load.RssFloor.exported(self.floors, indices))
        return result

    def _benchmark(self, indices: list[int]) -> None:
        """These commands from setup to cleanup, their runs in rounds (one command: in a row)."""
        for index in indices:
            self._auxiliary(index, self.commands[index].setup, "setup")
        for round_ in range(self.options.warmup):
            for index in indices:
                self._warmup(index, round_)
        while any(self._wants(index) for index in indices):
            for index in indices:
                if self._wants(index):
                    self._timed(index)
                    if not self._wants(index):
                        self._command_done(index)
        for index in indices:
            self._auxiliary(index, self.commands[index].cleanup, "cleanup")

    def _calibrate(self) -> None:
        """hyperfine's shell correction: the shell's own start-up (``SHELL -c ''``, the mean of
        CALIBRATION_RUNS) is measured once and taken off every shell command's figures."""
        shell = self.options.shell
        if shell is None or not any(command.shell for command in self.commands):
            return
        argv = (*shell, "-c", "")
        shown = " ".join(shell) + " -c ''"
        assert self.executor is not None, "made when the session runs"
        measured = []
        for _ in range(CALIBRATION_RUNS):
            run = self.executor.measure(argv, None, None, None)
            self._stop_if_cancelled(run)
            if run.wall_ns is None or run.exit_code != 0:
                why = run.error or run.ended()
                raise Failure(Kind.BENCH_FAILED, f"could not measure the shell's start-up ({sanitize(shown)}): {why}")
            measured.append(run)
        user, system, cpu = (
            _mean_s([getattr(run, name) for run in measured]) for name in ("user_ns", "system_ns", "tree_cpu_ns")
        )
        self.shell_startup = Startup(
            shown, fmean(run.wall_ns or 0 for run in measured) / 1e9, user, system, len(measured), cpu
        )

    def _stop_if_signalled(self) -> None:
        """A stop signal caught after the last run (its bookkeeping, the exports' rewrite, the
        cleanup's end, the host's close: ``Host.close`` dispatches what it caught before its
        watch ends) stops the benchmark as one during a run does, rather than being lost when
        the session gives the process's handlers back. Asked once the engine is closed."""
        stopped = getattr(self.executor, "stopped", None)  # a test's executor takes no signals
        source = stopped() if stopped is not None else None
        if source is not None:
            raise Stopped(self.stop_line(" by a signal"), source)

    def stop_line(self, how: str) -> str:
        """A stop's line (``how``: ``: why``, `` by a signal``), naming the command whose steps went
        on as its ``Benchmark N:`` line does (none during the shell's calibration)."""
        if self.running is None:
            return f"benchmark stopped{how}"
        return f"benchmark stopped during {quoted(self.commands[self.running].label)}{how}"

    def _stop_if_cancelled(self, measured: driver.Measured) -> None:
        if measured.cancelled:
            raise Stopped(self.stop_line(f": {measured.error}"), measured.stop_source)

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

    def _auxiliary(self, index: int, argv: tuple[str, ...] | None, step: str) -> None:
        """A setup, prepare, conclude or cleanup command: contained, untimed, and it must succeed."""
        if argv is None:
            return
        measured = self._measure(index, argv)
        self._stop_if_cancelled(measured)
        failure = failed.step_failure(self.options, argv, step, measured)
        if failure is not None:
            raise failure

    def _warmup(self, index: int, round_: int) -> None:
        measured = self._run(index, f"warmup-{round_ + 1}", f"warmup-{round_}")
        wall = self._charged(index, measured)[0]
        self.warmups[index].append(wall)

    def _run(self, index: int, what: str, iteration: str) -> driver.Measured:
        """One run of a command between its ``--prepare`` and its ``--conclude``; stops the
        benchmark where it must."""
        command = self.commands[index]
        self._auxiliary(index, command.prepare, "prepare")
        if self.progress is not None:
            self.progress.running(index, what)
        measured = self._measure(index, command.argv, self._jsonl(index, what), iteration, command.output)
        self._stop_if_cancelled(measured)
        failure = failed.run_failure(self.options, command, measured, what)
        if failure is not None:
            raise failure
        self._auxiliary(index, command.conclude, "conclude")
        return measured

    def _measure(
        self,
        index: int,
        argv: tuple[str, ...],
        jsonl: str | None = None,
        iteration: str | None = None,
        output: str | None = None,
    ) -> driver.Measured:
        assert self.executor is not None, "made when the session runs"
        self.running = index
        measured = self.executor.measure(argv, jsonl, iteration, output)
        self.leftovers[index] += measured.leftovers
        return measured

    def _charged(self, index: int, measured: driver.Measured) -> list[float | None]:
        """Wall, user, system and the tree's CPU seconds, the shell's start-up's own figure taken
        off each of a shell command's (hyperfine's, at 0 at least); None where the run's figure
        was not measured, and nothing taken off where the start-up's was not."""
        figures = (measured.wall_ns, measured.user_ns, measured.system_ns, measured.tree_cpu_ns)
        seconds = [None if ns is None else ns / 1e9 for ns in figures]
        startup = self.shell_startup
        if startup is None or not self.commands[index].shell:
            return seconds
        taken = (startup.wall, startup.user, startup.system, startup.cpu)
        return [
            value if value is None or less is None else max(value - less, 0.0) for value, less in zip(seconds, taken)
        ]

    def _timed(self, index: int) -> None:
        runs = self.runs[index]
        assert self.executor is not None, "made when the session runs"
        clock = self.executor.clock
        started = clock()
        measured = self._run(index, f"run-{len(runs) + 1}", str(len(runs)))
        cycle = clock() - started  # the run with its --prepare/--conclude and the runner's own work
        self.floors[index].after(measured.max_rss_bytes)  # bench's own resident set, read when it may matter
        wall, user, system, cpu = self._charged(index, measured)
        runs.append(
            TimedRun(
                order=self.order,
                wall=wall,
                user=user,
                system=system,
                cpu=cpu,
                memory=measured.max_rss_bytes,
                exit_code=measured.exit_code,
                timed_out=measured.timed_out,
                tree_memory=measured.peak_memory_bytes,
                counters=measured.counters,
                off_cpu=None if measured.off_cpu_ns is None else measured.off_cpu_ns / 1e9,
            )
        )
        self.order += 1
        self.spent[index] += cycle
        if self.options.runs is None:  # re-estimated after every run, from the mean cycle so far
            self.targets[index] = max(len(runs), self.options.run_count(self.spent[index] / len(runs)))
        if self.progress is not None:
            self.progress.update(index, runs, self.targets[index] or len(runs), self.spent[index])


def settings(
    opts: Options, shell_startup: Startup | None = None, load: dict | None = None, missing: list | None = None
) -> dict:
    """The options that shaped the runs, as the JSON export records them (``shell_startup``: once the
    session has measured it; ``host_load``: what other processes took of the CPUs while the runs went on,
    ``host_load.others_share``; ``counters_missing``: the perf counters this host could not open, ``counters.py``)."""
    return {
        "order": opts.order.value,
        "metric": opts.metric,
        "cpus": list(opts.cpus) if opts.cpus is not None else None,
        "timeout_ms": opts.timeout_ms,
        "warmup": opts.warmup,
        "ignore_failure": list(opts.ignore_failure) if isinstance(opts.ignore_failure, tuple) else opts.ignore_failure,
        "timed_interval": INTERVAL,
        "reference": opts.reference,
        "shell": " ".join(opts.shell) if opts.shell is not None else None,
        "shell_startup": None if shell_startup is None else shell_startup.to_json(),
        "host_load": load,
        "counters_missing": missing,
    }


class Stopped(Failure):
    """A stop signal ended the benchmark; ``source`` names it (``ctrl_c``: the CLI then dies by
    SIGINT once everything is released, as hyperfine and ``batch`` do, so a shell loop stops)."""

    def __init__(self, message: str, source: str | None):
        super().__init__(Kind.CANCELLED, message)
        self.source = source
