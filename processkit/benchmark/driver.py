"""The one place ``bench`` touches the engine: the measurement seam (``Executor``) and its real
side (``Engine``), every run of a session carried on one lodged host.

Everything engine-specific is here so the rest of ``processkit.benchmark`` sees only
``Measured`` values: the RunSpec a benchmark run gets (``session_spec``, built once by the run
grammar, and ``run_spec``, each run's own parts on it: the one mapping of a plan's command to the
engine's input), how it is carried, and how the outcome's timestamps and usage
become figures. A session's runs share one ``Host`` (its loop, reaper and signal watch), lodged
as a batch's jobs are (``Host.lodge``: each run's socket and record are names in one directory
of the session's), so a run costs what a batch job costs, not a runner's whole set-up.

The timed interval holds the command, not the containment's set-up or the engine's work: from
the outcome's ``command_from_ns`` (the native spawn's child's first step, plus the time it
spent joining its cgroups by write; else ``started_ns``, just before the spawn) to the root's
exit as the kernel recorded it (``exit_clock``; else ``ended_ns``, when the loop reaped it).
The group's CPU counters also hold the joining and the kernel's exit work after the exit
record, so a single-threaded command's CPU time can exceed its wall time by those tenths of a
millisecond. The memory figures are the root's ``ru_maxrss`` (``max_rss_bytes``, hyperfine's
``memory_usage_byte``) and the group's peak; a command's run also gets its tree's perf
counters (``counters``), opened here around it and never on ``run``'s path. Figures: the engine's ``Usage``
(``containment.accounting``: the run's cgroups, or for a process group the reaped children and
the live members), read again once the tree is gone.

A test puts another ``Executor`` in the engine's place (times, exit codes and timeouts of its
choosing); the session cannot tell.
"""

from __future__ import annotations

import gc
import os
import time

from .. import caller_fds, signum
from .measured import Measured, measured_from
from ..context import RunContext
from ..spec import LATE_PUBLICATION_MS, EnvPlan, RunSpec, StdinMode, carrier_cwd, new_run_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Protocol

    from ..engine.host import Host
    from .counters import Opener
    from .plan import Options

    class Executor(Protocol):
        """Runs one command once and measures it: the session's only way to run anything."""

        def measure(
            self, argv: tuple[str, ...], jsonl: str | None, iteration: str | None, output: str | None
        ) -> Measured: ...

        def clock(self) -> float:
            """Seconds on the clock run cycles are timed by (``--min-time``)."""
            ...

        def close(self) -> None: ...


LINGER_MS = 5  # the spawn waits this long for the command's exit before the engine goes on (RunContext.linger_ms)
TICK_SECONDS = 0.25  # how often the running command's progress line is redrawn while it runs
WATCHED = (signum.SIGINT, signum.SIGTERM, signum.SIGHUP, signum.SIGCHLD)  # what the host's signal watch takes
ITERATION_VARIABLE = "HYPERFINE_ITERATION"  # hyperfine's name, so scripts written for it work
# hyperfine's too: every run's environment grows by 0 to 4095 bytes, drawn afresh each run, so
# the stack's start (below the environment) moves and no one alignment biases every run
# (Mytkowicz et al., "Producing wrong data without doing anything obviously wrong!", 2009)
OFFSET_VARIABLE = "HYPERFINE_RANDOMIZED_ENVIRONMENT_OFFSET"


def _every(host: Host, tick: Callable[[], None]) -> None:
    """``tick`` on the host's loop every TICK_SECONDS while it carries a run, for the session."""

    def again() -> None:
        tick()
        host.loop.call_later(TICK_SECONDS, again)

    host.loop.call_later(TICK_SECONDS, again)


def session_spec(options: Options) -> RunSpec:
    """What every run of a session shares, built by the run grammar (``grammar.run.build``) from the
    session's typed values, so a benchmark's run is checked as any other: its timeout, no grace
    period (a benchmark's run is ended at once), an environment the session sets whole, and the
    ``--input`` file. Each run's own parts are set on it (``run_spec``): the build, with its
    checks, is the session's, once, and a run pays only for a copy."""
    from ..grammar.run import build
    from ..grammar import FLAGS

    given: dict[str, object] = {"jsonl": os.devnull, "grace": 0, "env_clear": True, "no_echo": True}
    if options.timeout_ms is not None:
        given["timeout"] = f"{options.timeout_ms}ms"
    if options.input_file is not None:
        given["stdin_file"] = options.input_file
    return build((), given, FLAGS)


def run_spec(
    session: RunSpec,
    argv: tuple[str, ...],
    options: Options,
    jsonl: str | None,
    iteration: str | None,
    run_id: str,
    environment: tuple[tuple[str, str], ...],
    output: str | None = None,
    output_fd: int | None = None,
    cwd: str | None = None,
) -> tuple[RunSpec, RunContext]:
    """What the engine runs for one run of a benchmark: the ``session``'s spec with this run's
    command, id, stream, echo and environment, and the context the session wires in beside it
    (``output_fd``, the descriptor its stdout is a copy of: ``outputs.SessionOutputs``; published
    late unless its stream is kept).
    ``output`` None: a setup/prepare/conclude/cleanup command or the shell's calibration (no
    ``iteration``; its output discarded as a ``pipe`` run's, or echoed with ``--show-output``;
    stdin /dev/null); else a command's run, its ``--output`` (``where``) and ``--input``.
    ``environment``: the session's, read once (``os.environ`` decodes every key at each read),
    with hyperfine's ``OFFSET_VARIABLE`` of a new length (every run, steps and calibration too);
    ``cwd``: the session's working directory, read once (None: the engine's ``getcwd`` a run)."""
    offset = (OFFSET_VARIABLE, "X" * (int.from_bytes(os.urandom(2), "little") % 4096))  # hyperfine's draw
    assignments = (
        (*environment, offset) if iteration is None else (*environment, offset, (ITERATION_VARIABLE, iteration))
    )
    echo, stdin_file = options.show_output, None
    if output is not None:
        echo = where(options, output) == "inherit"
        stdin_file = session.stdin_file
    spec = session.replace(
        argv=argv,
        jsonl=jsonl if jsonl is not None else os.devnull,
        run_id=run_id,
        echo=echo,
        stdin=StdinMode.FILE if stdin_file is not None else StdinMode.NULL,
        stdin_file=stdin_file,
        env=EnvPlan(clear=True, assignments=assignments),
    )
    late = LATE_PUBLICATION_MS if jsonl is None else None  # a kept stream's run is published at once
    passed = caller_fds.taken()  # the caller's descriptors, kept by each run as hyperfine's are
    return spec, RunContext(publish_after_ms=late, output_fd=output_fd, linger_ms=LINGER_MS, cwd=cwd, passed_fds=passed)


def where(options: Options, output: str) -> str:
    """Where a command's run writes: its ``--output``, or the terminal with ``--show-output``."""
    return "inherit" if options.show_output else output


class Engine:
    """The real executor: every run of a session on one host, lodged, whose signal watch is
    the session's (a stop signal between two runs cancels the next one before its child
    starts). ``lodged`` (a session of many runs): the runs' sockets and records in one directory.
    ``ends_descendants``: this process is the benchmark's own (the CLI), so whatever is left
    descended from it once a run has ended is that run's, and is ended and said (``escaped``), but
    what it had below it before its first run (``leftovers.inherited``: a shell's job); a
    caller measuring one command (``measure``) keeps its own children. (Either way the host
    watches the process's signals while a run goes on.)
    ``tick``: called on the host's loop every TICK_SECONDS while a run goes on (the progress line).
    ``stop_fd``: a stop's source written to it (or its end of file) stops the session as that
    signal would, the run going on first (``engine.stopfd``: the API caller's connection).
    ``ahead``: no step (``--prepare``, ``--conclude``) runs between two runs of the commands, so
    the next command run's counters are opened while a command run goes on, once its child
    exists (``_after_spawn``): for a command longer than the spawn's linger, off the path from
    one child's exit to the next one's exec (the kernel's part of a first open after a child's
    exit is most of the ~30 us). Opened after the child's clone, they are not the child's; a step's
    run (a setup, a cleanup) finding them closes them before its own spawn.
    A process that is the benchmark's own (``ends_descendants``) keeps its start-up's objects out
    of the cyclic collector's passes until ``close`` (``gc.freeze``): the one pass due among the
    samples went through all of them (5-30 ms once). Runs leave no cycle (test_bench_garbage).
    Its pool's idle memory groups keep their files (``fdlimit.leave_room_for_idle_groups``): one
    lent again is restarted by ``pread``s, not 8-10 opens and closes (test_bench_idle_groups)."""

    def __init__(
        self,
        options: Options,
        ends_descendants: bool = True,
        lodged: bool = True,
        tick: Callable[[], None] | None = None,
        stop_fd: int | None = None,
        ahead: bool = False,
    ) -> None:
        from ..engine import runner
        from ..containment import escaped, leftovers
        from ..engine.endings import Outcome, cancelled_headline
        from ..engine.host import Host

        self._steps, self._outcome = runner.steps, Outcome  # imported once, not once a run
        self._escaped, self._headline = escaped, cancelled_headline  # ``escaped``: each run's escapees ended, said
        self.options = options
        self.ends_descendants = ends_descendants
        # what this process had below it before its first run (a shell's background job handed
        # over across exec) is no run's: spared by the sweep after each run
        self._spare = leftovers.inherited() if ends_descendants else leftovers.NOTHING
        self._said = False  # a run's escapees said: every later run's ended, counted, not said again
        self._watched = {number: signum.getsignal(number) for number in WATCHED}
        self._label = f"bench-{os.getpid()}-{time.time_ns()}"  # the session's lodging, not a run
        self._environment = tuple(os.environ.items())
        self._cwd = carrier_cwd()  # once a session, not a getcwd a run (RunContext.cwd)
        self._session = session_spec(options)
        if ends_descendants:  # the process is the benchmark's own: its start-up set aside
            gc.freeze()
            from .. import fdlimit

            # its pool's idle memory groups keep their files open (restarted by a few preads)
            fdlimit.leave_room_for_idle_groups(fdlimit.soft_limit())
        self._counters: Opener | None = None
        from . import direct

        self._direct = direct  # a command's sample without the engine's run path
        self._backend: str | None = None  # the spawn's, for it (``_direct_backend``)
        self._ahead = ahead
        self._next_fds: dict[str, int | None] | None = None  # the next command run's counters, opened ahead
        from .exit_clock import ExitClock

        self._exit_clock = ExitClock()  # the root's exit time from the kernel (the interval's end)
        from . import perf_switch

        perf_switch.settle()  # the start-up's helper collected before the host's reaper exists
        self.host = Host()
        from .outputs import SessionOutputs

        self._outputs = SessionOutputs(self.host.loop, options.named)
        if lodged:
            self.host.lodge(self._label)
        if tick is not None:
            _every(self.host, tick)
        if stop_fd is not None:
            from ..engine import stopfd

            stopfd.watch(self.host, stop_fd)

    def clock(self) -> float:
        return time.monotonic()

    def _counting(self):
        """The perf counters' opener (``counters.Opener``), made at the first command's run."""
        if self._counters is None:
            from .counters import Opener

            self._counters = Opener()
        return self._counters

    @property
    def counters_missing(self) -> list[str]:
        """The counters this host could not open (said once in the summary)."""
        return list(self._counters.missing) if self._counters is not None else []

    def measure(
        self, argv: tuple[str, ...], jsonl: str | None = None, iteration: str | None = None, output: str | None = None
    ) -> Measured:
        """Run ``argv`` once, contained, and measure it; never raises for what the run reports
        (``output``: as ``run_spec`` takes it)."""
        output_fd, own_fd = None, None
        if output is not None:
            output_fd, owned = self._outputs.descriptor(where(self.options, output))
            own_fd = output_fd if owned else None
        elif not self.options.show_output:  # a step or the shell's calibration, its output discarded
            output_fd = self._outputs.descriptor("pipe")[0]
        spec, context = run_spec(
            self._session, argv, self.options, jsonl, iteration, new_run_id(), self._environment, output, output_fd,
            self._cwd,
        )  # fmt: skip
        counting = self._counting() if output is not None else None  # a command's run: its tree counted
        fds, self._next_fds = self._next_fds, None
        if counting is None:
            if fds is not None:  # opened ahead, but a step runs first: its child must not count into them
                self._counting().close(fds)
                fds = None
        elif fds is None:
            fds = counting.open()
        ahead = (lambda: self._open_ahead(counting)) if counting is not None and self._ahead else _nothing
        direct = self._direct.takes(self.host, spec, context, output is not None) and self._direct_backend()
        exits = self._exit_clock.open()
        try:
            outcome: object = self._direct.sample(self.host, spec, context, direct, ahead) if direct else None
            if outcome is None:  # not a direct sample, or its containment refused: the engine's run and words
                steps = self._steps(self.host, spec, context=context)
                if ahead is not _nothing:
                    steps = _after_spawn(steps, self.host, ahead)
                outcome = self.host.carry(steps)
        except BaseException:
            if counting is not None and fds is not None:
                counting.close(fds)
            raise
        finally:
            if own_fd is not None:
                os.close(own_fd)
        self._outputs.drain()  # the run's last output: none of it is read during the next run
        assert isinstance(outcome, self._outcome)
        exited_ns = self._exit_clock.read(exits)
        if exited_ns is not None and outcome.ended_ns is not None and exited_ns <= outcome.ended_ns:
            outcome.ended_ns = exited_ns  # the root's exit, not when the loop got to notice it
            outcome.exit_timed = True
        measured = measured_from(outcome)
        if counting is not None and fds is not None:
            measured.counters = counting.read(fds)  # the tree is gone: every member's count is folded in
        if not measured.cancelled and self.stopped() is not None:  # caught in its linger or teardown
            measured.cancelled = True
            measured.error = f"{self._headline(self.host.stop_source)}: the command had exited"
        measured.stop_source = self.host.stop_source if measured.cancelled else None
        if self.ends_descendants:  # what the run's boundary did not hold (a ``setsid`` daemon, a cgroup escapee)
            escaped = self._escaped  # its own group holds its helpers: spared (``own_group``)
            said = escaped.end_escapees(
                self._spare, "this benchmark's run", left=escaped.LEFT_EITHER, own_group=False, quiet=self._said
            )
            measured.leftovers = len(said)
            self._said = self._said or bool(said)  # said once a benchmark; later runs' counted (``left N``)
        return measured

    def _direct_backend(self) -> str:
        """The spawn's backend for the direct path (``direct``), chosen once; "" where the
        choice fails (native demanded, not built): the engine's path then reports it."""
        if self._backend is None:
            from ..engine import spawn
            from ..errors import Failure

            try:
                self._backend = spawn.select_backend()
            except Failure:
                self._backend = ""
        return self._backend

    def stopped(self) -> str | None:
        """A stop signal's source once one was caught, else None; an attribute's look. Asked after
        each run: one caught once its end was decided (the spawn's linger takes the command's exit
        with no loop turn; its teardown) ends the benchmark at that run, as one during the command
        does, not at the next (nor never, after the last); and by the session after its last run."""
        self.host.dispatch_caught_signals()
        return self.host.stop_source

    def _open_ahead(self, counting: Opener) -> None:
        if self._next_fds is None:
            self._next_fds = counting.open()

    def close(self) -> None:
        """The host and its lodging gone; the handlers the session found are back."""
        if self._next_fds is not None:
            self._counting().close(self._next_fds)
            self._next_fds = None
        self._exit_clock.close()
        self._outputs.close()
        if self._counters is not None:
            self._counters.release()
        try:
            self.host.close()
        finally:
            for number, handler in self._watched.items():
                signum.signal(number, handler)
            if self.ends_descendants:
                gc.unfreeze()


def _nothing() -> None:
    """No counters to open ahead."""


def _after_spawn(steps, host: Host, then: Callable[[], None]):
    """``steps`` as the host carries them, with ``then`` called once, at the first wait by which
    the run's child exists (the spawn reports the child's exec at a wait of its own, so that is
    not always the first; a run whose spawn failed calls nothing). Once it is called, the rest
    of the run's waits go to ``steps`` directly (``yield from``): no Python step of this layer
    between the host and each later wait."""
    called, thrown = False, None
    while True:
        try:
            wait = steps.send(None) if thrown is None else steps.throw(thrown)
        except StopIteration as stop:
            return stop.value
        thrown = None
        if not called and host.runs and all(run.root_pid is not None for run in host.runs):
            called = True
            then()
        try:
            yield wait
        except GeneratorExit:
            steps.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - thrown into the run's wait: the run's to handle
            thrown = exc
            continue
        if called:
            return (yield from steps)


def measure(argv: tuple[str, ...], *, timeout_ms: int | None = None, jsonl: str | None = None) -> Measured:
    """One run on a host of its own, this process's handlers as they were after it: for a
    caller measuring a single command (the test suite); a benchmark keeps one ``Engine``."""
    from .plan import Options

    engine = Engine(Options(timeout_ms=timeout_ms), ends_descendants=False, lodged=False)
    try:
        return engine.measure(argv, jsonl)
    finally:
        engine.close()
