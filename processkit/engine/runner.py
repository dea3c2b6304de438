"""A run from spawn to ``runner_exit``: setup, the race of endings, teardown, the final report.

The race is biased, not first-come: callbacks only *record* that an ending is ready, and after
each turn of the loop the highest-priority recorded ending wins (docs/run.md §1.3). So a child that
exits in the same turn as its deadline is reported as its own exit, and a signal beats all.
"""

from __future__ import annotations

import enum
import fcntl
import os
import signal
from typing import TYPE_CHECKING, NamedTuple

from .. import containment
from ..diagnostics import warn as _warn
from ..errors import Failure, Kind
from ..events.argv import command_object
from ..events.emitter import Emitter, utc_timestamp
from ..loop import Loop, Timer
from ..rundir import RunDir
from ..spec import OverflowPolicy, RunSpec, StdinMode
from . import capture, pump, spawn
from .echo import EchoSink
from .environment import build_environment
from .signals import STOP_SIGNALS, SignalWatch
from .stdin_feed import StdinFeed, open_source
from .terminal import Foreground, HandoffError

if TYPE_CHECKING:  # only the annotations: the pty module is imported by --pty runs alone
    from .pty import Keyboard, PseudoTerminal

MEMBER_POLL_SECONDS = 0.01
KILL_CONFIRM_SECONDS = 2.0
PUMP_DRAIN_SECONDS = 2.0  # after teardown: a pipe held open by an escapee must not hang the run
DRAIN_CEILING_SECONDS = 30.0  # ... nor an escapee that keeps writing to a slow but live consumer
ECHO_STALL_SECONDS = 1.0  # after the child is gone: a consumer this slow loses the live echo
PIPE_SIZE = 1024 * 1024
DEFAULT_PIPE_SIZE = 64 * 1024  # Linux's, assumed when the size cannot be set

# Facts about pipes that shape how a child's output is read:
# - A reader woken on readiness gets whatever is queued; a child writing line by line wakes the
#   runner once per line, so a loop turn (and a Python call) per ~100 bytes.
# - The kernel cannot wake a pipe reader at a fill level (no SO_RCVLOWAT for pipes): the only
#   way to read bigger pieces from a slow writer is to stay away for a while and let it queue.
# - While the reader stays away, a writer that fills the pipe blocks: a wait long enough to fill
#   the pipe caps the writer's throughput at one pipe per wait, whatever the reader could take.
# - A timer wait can last longer than asked (a busy machine), so what a wait brought says how
#   fast the writer is only when divided by how long the wait really lasted.
# So: after a short drain the stream stops reading for COALESCE_SECONDS (a lone line is still
# echoed at once; only the lines behind it wait). A drain right after such a wait that finds the
# pipe nearly full (the writer may have blocked), or that shows a writer able to half fill it in
# COALESCE_SECONDS, makes the stream read on every wakeup ("fast"). It waits again once a window
# of at least COALESCE_SECONDS shows half that rate: waiting then cannot fill the pipe.
SHORT_DRAIN = 64 * 1024  # a drain smaller than this means the child writes in small pieces
COALESCE_SECONDS = 0.002
DRAIN_BUDGET = 4 * 1024 * 1024  # per wakeup: a writer faster than the runner must not starve the loop


class EndingKind(enum.IntEnum):
    """Endings in priority order: a lower value wins when several are ready in one turn."""

    SIGNAL = 0
    CHILD_EXIT = 1
    CONTROL = 2
    OVERALL_TIMEOUT = 3
    IDLE_TIMEOUT = 4
    OVERFLOW = 5
    FOREGROUND = 6  # never raced: the terminal hand-off failed before the race began
    INTERNAL = 7  # never raced: a runner bug broke the race; the tree is still torn down


class Ending(NamedTuple):
    kind: EndingKind
    detail: str | None = None  # signal source, control verb, or overflowing stream


class Outcome(NamedTuple):
    """The runner's exit code, and the runner-own failure to report when there is one."""

    code: int
    failure: Failure | None = None


def child_exit_code(returncode: int) -> int:
    """The child's status as a shell would show it: 128+N for a death by signal N."""
    return returncode if returncode >= 0 else 128 + ((-returncode) & 0x7F)


def _make_rundir() -> RunDir | None:
    """The run's directory and liveness lock, made before any group; best effort."""
    try:
        return RunDir()
    except OSError as exc:
        _warn(f"no run directory, so nothing this run leaves can be reaped if its runner dies: {exc.strerror or exc}")
        return None


def format_duration(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def execute(spec: RunSpec) -> Outcome:
    """Run ``spec`` to completion. Never raises for anything the run itself can report."""
    try:
        runner_cwd = os.getcwd()
    except OSError as exc:
        return Outcome(Kind.SETUP.code, Failure(Kind.SETUP, f"cannot read the runner's working directory: {exc.strerror}"))
    try:
        emitter = Emitter(spec.jsonl)
    except OSError as exc:
        return Outcome(Kind.SETUP.code, Failure(Kind.SETUP, f"cannot open --jsonl {spec.jsonl}: {exc.strerror}"))
    try:
        return Run(spec, emitter, runner_cwd).execute()
    finally:
        emitter.close()


class OutputStream:
    """One child output pipe (or, with ``--pty``, the terminal's master) with its pump, echo
    sink and read pacing (see facts about pipes)."""

    def __init__(
        self, run: Run, name: str, fd: int, target: capture.CaptureTarget | None, echo_fd: int | None, pty: bool = False
    ):
        self.name = name
        self.fd = fd
        self._run = run
        self._loop = run.loop
        self.open = True
        self.paused = False  # the echo consumer is behind: reading waits for it (backpressure)
        self._coalescing: Timer | None = None  # the timer that ends a wait after a short drain
        self._wait_started = 0.0
        self._fast = False  # the writer fills the pipe during a wait: read on every wakeup
        self._window_start = 0.0  # while fast: the current window ...
        self._window_bytes = 0  # ... and the bytes drained in it
        self._terminal = pty  # a terminal hands out 4 KiB a read: drain it to empty, never wait
        os.set_blocking(fd, False)
        try:
            pipe_size = fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:  # a smaller pipe only means more wakeups (and a terminal is no pipe)
            pipe_size = DEFAULT_PIPE_SIZE
        self._nearly_full = pipe_size * 3 // 4
        self._fast_rate = pipe_size / 2 / COALESCE_SECONDS  # bytes per second
        self.echo = EchoSink(self._loop, echo_fd, self._resume) if echo_fd is not None else None
        self.pump = pump.make_pump(run.pump_backend, fd, target, self.echo)
        self._loop.add_reader(fd, self._on_readable)

    def _on_readable(self) -> None:
        self._drain(after_wait=False)

    def _coalesced(self) -> None:
        self._coalescing = None
        if self.open and not self.paused:
            self._drain(after_wait=True)

    def _drain(self, after_wait: bool) -> None:
        try:
            count = self.pump.drain(DRAIN_BUDGET, until_empty=self._terminal)
        except OSError:
            count = pump.EOF_REACHED  # an unreadable pipe ends like EOF, and so does a pty's hang-up (EIO)
        if count == pump.EOF_REACHED:
            self.close()
            return
        if count == pump.WOULD_BLOCK:
            if after_wait:  # the writer fell silent: wait for it on readiness again
                self._loop.add_reader(self.fd, self._on_readable)
            return
        self._run.saw_output(self)
        if self.echo is not None and self.echo.full:
            self.paused = True
            self._loop.remove_reader(self.fd)
        elif self._keeps_reading(count, after_wait):
            if after_wait:
                self._loop.add_reader(self.fd, self._on_readable)
        else:
            if not after_wait:
                self._loop.remove_reader(self.fd)
            self._coalescing = self._loop.call_later(COALESCE_SECONDS, self._coalesced)
            self._wait_started = self._loop.now

    def _keeps_reading(self, count: int, after_wait: bool) -> bool:
        """False when the stream should wait for its pipe to fill before the next read."""
        if self._terminal:
            return True
        now = self._loop.now
        if after_wait and (count >= self._nearly_full or count >= self._fast_rate * (now - self._wait_started)):
            self._fast, self._window_start, self._window_bytes = True, now, 0
            return True
        if self._fast:
            self._window_bytes += count
            elapsed = now - self._window_start
            if elapsed >= COALESCE_SECONDS:
                self._fast = self._window_bytes >= self._fast_rate / 2 * elapsed
                self._window_start, self._window_bytes = now, 0
            return self._fast or count >= SHORT_DRAIN
        return count >= SHORT_DRAIN

    def _resume(self) -> None:
        if self.paused and self.open:
            self.paused = False
            if self._coalescing is None:
                self._loop.add_reader(self.fd, self._on_readable)

    def close(self) -> None:
        if self.open:
            self.open = False
            if self._coalescing is not None:
                self._coalescing.cancel()
                self._coalescing = None
            self._loop.remove_reader(self.fd)
            os.close(self.fd)


class Run:
    def __init__(self, spec: RunSpec, emitter: Emitter, runner_cwd: str):
        self.spec = spec
        self.events = emitter
        self.runner_cwd = runner_cwd
        self.loop = Loop()
        self.pump_backend = "python"
        self.spawn_backend = "python"
        self.rundir: RunDir | None = None
        self.container: containment.Container | None = None
        self.child: spawn.Child | None = None
        self.streams: list[OutputStream] = []
        self._targets: dict[str, capture.CaptureTarget] = {}
        self._stdin_source: int | None = None
        self._stdin_feed: StdinFeed | None = None
        self._foreground: Foreground | None = None
        self._terminal: PseudoTerminal | None = None  # --pty: the child's terminal
        self._keyboard: Keyboard | None = None  # --pty: the caller's terminal relayed into it
        self._env: dict[str, str] | None = None
        self._pending: dict[EndingKind, str | None] = {}
        self._timers: dict[str, Timer] = {}
        self._last_output = 0.0
        self._pidfd: int | None = None
        self._signals: SignalWatch | None = None
        self._returncode: int | None = None
        self._publication = None
        self.started_at = ""

    # -- the whole run ------------------------------------------------------------------------
    def execute(self) -> Outcome:
        try:
            return self._execute()
        finally:
            if self._keyboard is not None:  # whatever happened, the caller gets its terminal back
                self._keyboard.restore()

    def _execute(self) -> Outcome:
        try:
            self._prepare()
            self._start()
        except Failure as failure:
            return self._fail_before_race(failure)
        except spawn.AttachError as exc:
            self.events.emit("container_failed", phase="attach", code=Kind.CONTAINER_ERROR.code, message=str(exc))
            return self._fail_before_race(Failure(Kind.CONTAINER_ERROR, str(exc)))
        except HandoffError as exc:
            return self._finish(Ending(EndingKind.FOREGROUND, str(exc)))
        try:
            ending = self._race()
        except Exception as exc:  # noqa: BLE001 - a bug must still end the tree and the stream
            ending = Ending(EndingKind.INTERNAL, f"{type(exc).__name__}: {exc}")
        return self._finish(ending)

    # -- before spawn -------------------------------------------------------------------------
    def _prepare(self) -> None:
        """Setup steps in the reference's fixed order; the first failure ends the run."""
        spec = self.spec
        self.pump_backend = pump.select_backend()
        self.spawn_backend = spawn.select_backend()
        if spec.capture_dir is not None:
            try:
                self._targets = capture.open_targets(spec.capture_dir, spec.capture_max_bytes)
            except OSError as exc:
                raise Failure(Kind.SETUP, f"cannot set up --capture-dir {spec.capture_dir}: {exc.strerror}") from None
        if spec.stdin is StdinMode.FILE:
            try:
                self._stdin_source = open_source(spec.stdin_file)
            except OSError as exc:
                raise Failure(Kind.SETUP, f"cannot open --stdin-file {spec.stdin_file}: {exc.strerror}") from None
        self._env = build_environment(spec.env, spec.run_id)
        if spec.pty:
            self._open_terminal()
        # From here the runner makes things on the host (a cgroup, a registry entry, a socket):
        # a stop signal must end the run through their release, not kill the runner and orphan
        # them. The steps above keep the default, so a signal still ends a wait on a FIFO there.
        self._signals = SignalWatch(self.loop, self._signal_handlers())
        self.rundir = _make_rundir()
        try:
            self.container = containment.create(spec.limits, self.rundir)
        except containment.ContainerError as exc:
            if isinstance(exc, containment.LimitUnavailable):
                self.events.emit("limit_hit", limit=exc.limit, detail=exc.detail)
            self.events.emit("container_failed", phase="create", code=Kind.CONTAINER_ERROR.code, message=str(exc))
            raise Failure(Kind.CONTAINER_ERROR, str(exc)) from None
        self._publication = self._publish()

    def _open_terminal(self) -> None:
        from .pty import PseudoTerminal, with_default_term

        self._env = with_default_term(self._env)
        try:
            self._terminal = PseudoTerminal(self.spec.pty_size)
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot open a pseudo-terminal for --pty: {exc.strerror}") from None

    def _start(self) -> None:
        spec = self.spec
        pipe_output = not spec.inherit_stdio
        cwd = os.path.join(self.runner_cwd, spec.cwd) if spec.cwd is not None else None
        self._signals.dispatch()
        if EndingKind.SIGNAL in self._pending:  # stopped during setup: the child never starts
            source = self._pending[EndingKind.SIGNAL]
            raise Failure(Kind.CANCELLED, f"run cancelled by {source} before its child was started")
        try:
            self.child = spawn.spawn(
                spec.argv,
                env=self._env,
                cwd=cwd,
                container=self.container,
                stdin=spec.stdin,
                pipe_output=pipe_output,
                backend=self.spawn_backend,
                terminal=self._terminal.take_slave() if self._terminal is not None else None,
            )
        except Failure as failure:
            self.events.emit("spawn_failed", code=failure.code, message=failure.message)
            raise
        self.container.adopt(self.child.pid)
        terminal = self._terminal
        if terminal is not None:  # one stream: what the terminal emits, reported as stdout
            echo_fd = 1 if spec.echo else None
            self.streams.append(OutputStream(self, "stdout", terminal.endpoint(), self._targets.get("stdout"), echo_fd, pty=True))
        elif pipe_output:
            echo = spec.echo
            for name, fd, own_fd in (("stdout", self.child.stdout, 1), ("stderr", self.child.stderr, 2)):
                self.streams.append(OutputStream(self, name, fd, self._targets.get(name), own_fd if echo else None))
        if self._stdin_source is not None:
            if terminal is not None:
                self._stdin_feed = StdinFeed(self.loop, self._stdin_source, terminal.endpoint(), terminal.end_of_input)
            else:
                self._stdin_feed = StdinFeed(self.loop, self._stdin_source, self.child.stdin)
            self._stdin_source = None
        elif terminal is not None:
            from .pty import Keyboard

            self._keyboard = Keyboard.take(self.loop, terminal.endpoint)
        if spec.stdin is StdinMode.INHERIT:
            self._foreground = Foreground.lend(self.child.pid)
        self.started_at = utc_timestamp()
        self.events.emit(
            "run_started",
            run_id=spec.run_id,
            labels=dict(sorted(spec.labels)),
            root_pid=self.child.pid,
            mechanism=self.container.mechanism,
            abrupt_cleanup=self.container.abrupt_cleanup,
            cwd=cwd if cwd is not None else self.runner_cwd,
            command=command_object(spec.argv, raw=spec.argv_raw),
        )
        self._emit_snapshot("spawn")

    def _publish(self):
        """Register the run and open its control socket: best effort, the child runs anyway."""
        from ..control.publication import PublishedRun, publish

        spec = self.spec
        run = PublishedRun(
            loop=self.loop,
            run_id=spec.run_id,
            argv=spec.argv,
            labels=spec.labels,
            jsonl=spec.jsonl,
            capture_dir=spec.capture_dir,
            cwd=self.runner_cwd,
            mechanism=self.container.mechanism,
            rundir=self.rundir,
            root_pid=lambda: self.child.pid if self.child is not None else None,
            members=self.read_member_list,
            stop=self.control_stop,
        )
        return publish(run, _warn)

    def _fail_before_race(self, failure: Failure) -> Outcome:
        if self._signals is not None:
            self._signals.close()
        if self._stdin_source is not None:
            os.close(self._stdin_source)
        if self._terminal is not None:
            self._terminal.close()
        for target in self._targets.values():
            os.close(target.fd)
        if self._publication is not None:
            self._publication.close()
        if self.container is not None:
            self.container.release()
        if self.rundir is not None:
            self.rundir.close()
        self.events.emit("runner_exit", code=failure.code, source=failure.kind.label, child_code=None)
        return Outcome(failure.code, failure)

    # -- the race -----------------------------------------------------------------------------
    def request_ending(self, kind: EndingKind, detail: str | None = None) -> None:
        """Record that an ending is ready; the loop's turn decides which one wins."""
        self._pending.setdefault(kind, detail)

    def _race(self) -> Ending:
        spec, loop = self.spec, self.loop
        self._watch_root()
        start = loop.clock()
        self._last_output = start
        if spec.timeout_ms is not None:
            overall = lambda: self.request_ending(EndingKind.OVERALL_TIMEOUT)  # noqa: E731
            self._timers["overall"] = loop.call_at(start + spec.timeout_ms / 1000, overall)
        if spec.idle_timeout_ms is not None:
            self._timers["idle"] = loop.call_at(start + spec.idle_timeout_ms / 1000, self._check_idle)
        if spec.snapshot_interval_ms is not None:
            self._timers["snapshot"] = loop.call_at(start + spec.snapshot_interval_ms / 1000, self._interval_snapshot)
        while not self._pending:
            loop.run_once()
        kind = min(self._pending)
        return Ending(kind, self._pending[kind])

    def _signal_handlers(self) -> dict:
        handlers = {signum: self._on_stop_signal for signum in STOP_SIGNALS}
        handlers[signal.SIGCHLD] = lambda signum: self._reap_children()
        if self.spec.pty:
            handlers[signal.SIGWINCH] = lambda signum: self._terminal.follow_caller()
        return handlers

    def _on_stop_signal(self, signum: int) -> None:
        self.request_ending(EndingKind.SIGNAL, STOP_SIGNALS[signum])

    def _watch_root(self) -> None:
        self._pidfd = self.child.pidfd  # from the clone itself on the native path
        if self._pidfd is None:
            try:
                self._pidfd = os.pidfd_open(self.child.pid)
            except (AttributeError, OSError):
                pass  # SIGCHLD alone announces the exit
        if self._pidfd is not None:
            self.loop.add_reader(self._pidfd, self._reap_children)
        self._reap_children()

    def _reap_children(self) -> None:
        """Collect every exited child: the root (through its Child, keeping its status) and any
        orphan adopted as subreaper. Peeking with WNOWAIT avoids stealing the root's status.
        Before spawn there is no root yet: a child the runner inherited waits for the race."""
        if self.child is None:
            return
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
            if info is None:
                break
            if info.si_pid == self.child.pid:
                self._returncode = self.child.wait()
                self._forget_root()
            else:
                try:
                    os.waitpid(info.si_pid, 0)
                except ChildProcessError:
                    pass
        if self._returncode is None and self.child.poll() is not None:
            self._returncode = self.child.returncode
            self._forget_root()

    def _forget_root(self) -> None:
        if self._pidfd is not None:
            self.loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self.request_ending(EndingKind.CHILD_EXIT)

    def saw_output(self, stream: OutputStream) -> None:
        self._last_output = self.loop.now
        spec = self.spec
        if spec.capture_overflow is OverflowPolicy.CANCEL and stream.pump.seen > spec.capture_max_bytes:
            self.request_ending(EndingKind.OVERFLOW, stream.name)

    def _check_idle(self) -> None:
        due = self._last_output + self.spec.idle_timeout_ms / 1000
        if self.loop.now >= due:
            self.request_ending(EndingKind.IDLE_TIMEOUT)
        else:
            self._timers["idle"] = self.loop.call_at(due, self._check_idle)

    def _interval_snapshot(self) -> None:
        if self._pending:
            return  # the snapshot timer ranks last: an ending ready in this turn stops the cadence
        self._emit_snapshot("interval")
        self._timers["snapshot"] = self.loop.call_later(self.spec.snapshot_interval_ms / 1000, self._interval_snapshot)

    def _read_members(self) -> tuple[list, bool]:
        try:
            return self.read_member_list(), False
        except OSError:
            return [], True

    def _emit_snapshot(self, reason: str) -> None:
        found, read_error = self._read_members()
        if read_error:
            _warn("could not read the container's members")
        self.events.emit(
            "members_snapshot", reason=reason, read_error=read_error, members=[m.as_event() for m in found]
        )

    # -- what the control plane may see and ask -------------------------------------------------
    def read_member_list(self):
        """The container's current members; raises OSError when they cannot be read."""
        from ..containment.members import read_members

        return read_members(self.container.member_pids())

    def control_stop(self, verb: str) -> None:
        """A control-plane ``cancel`` or ``kill``; acknowledged by the caller before this."""
        self.request_ending(EndingKind.CONTROL, verb)

    # -- after the ending is decided -----------------------------------------------------------
    def _finish(self, ending: Ending) -> Outcome:
        for timer in self._timers.values():
            timer.cancel()
        outcome = self._report_ending(ending)
        if self.spec.limits.requested:
            self.events.emit("limit_evidence", **self.container.limit_evidence())
        self._emit_resource_summary()
        self._teardown(ending)
        self._drain_outputs()
        self._signals.close()
        if self._targets and ending.kind is not EndingKind.FOREGROUND:
            reports = {s.name: s.pump.report() for s in self.streams}
            unused = capture.unused_report
            self.events.emit(
                "output_captured",
                **{name: (reports.get(name) or unused(self._targets[name])).as_event() for name in capture.STREAMS},
            )
        if self._publication is not None:
            self._publication.close()
        self._release()
        failure = outcome.failure
        self.events.emit(
            "runner_exit",
            code=outcome.code,
            source=failure.kind.label if failure else "child_exit",
            child_code=None if failure else outcome.code,
        )
        return outcome

    def _report_ending(self, ending: Ending) -> Outcome:
        spec = self.spec
        grace = spec.grace_ms
        kind = ending.kind
        if kind is EndingKind.FOREGROUND:
            self.events.emit("container_failed", phase="foreground", code=Kind.CONTAINER_ERROR.code, message=ending.detail)
            message = f"could not give the terminal to the child's process group: {ending.detail}"
            return Outcome(Kind.CONTAINER_ERROR.code, Failure(Kind.CONTAINER_ERROR, message))
        if kind is EndingKind.INTERNAL:  # like a failed wait: no ending event (docs/events.md §4)
            return Outcome(Kind.INTERNAL.code, Failure(Kind.INTERNAL, f"internal error: {ending.detail}"))
        if kind is EndingKind.CHILD_EXIT:
            rc = self._returncode
            signalled = rc < 0
            self.events.emit(
                "root_exited",
                outcome="signalled" if signalled else "exited",
                code=None if signalled else rc,
                signal=-rc if signalled else None,
            )
            return Outcome(child_exit_code(rc))
        stop = self._stop_phrase()
        if kind in (EndingKind.OVERALL_TIMEOUT, EndingKind.IDLE_TIMEOUT):
            overall = kind is EndingKind.OVERALL_TIMEOUT
            window = spec.timeout_ms if overall else spec.idle_timeout_ms
            self.events.emit("timeout", timeout_ms=window, grace_ms=grace, reason="overall" if overall else "idle")
            what = "run timed out after" if overall else "run produced no output for"
            return Outcome(Kind.TIMEOUT.code, Failure(Kind.TIMEOUT, f"{what} {format_duration(window)}: {stop}"))
        if kind is EndingKind.SIGNAL:
            self.events.emit("cancelled", source=ending.detail, grace_ms=grace)
            return Outcome(Kind.CANCELLED.code, Failure(Kind.CANCELLED, f"run cancelled by {ending.detail}: {stop}"))
        if kind is EndingKind.OVERFLOW:
            self.events.emit("output_overflow", stream=ending.detail, max_bytes=spec.capture_max_bytes, grace_ms=grace)
            message = f"{ending.detail} went over --capture-max-bytes {spec.capture_max_bytes}: {stop}"
            return Outcome(Kind.OUTPUT_OVERFLOW.code, Failure(Kind.OUTPUT_OVERFLOW, message))
        if ending.detail == "kill":
            self.events.emit("killed", source="control_kill")
            message = "run killed by a control-plane kill: hard-killed the process tree via the container"
            return Outcome(Kind.CONTROL_KILL.code, Failure(Kind.CONTROL_KILL, message))
        self.events.emit("cancelled", source="control_cancel", grace_ms=grace)
        return Outcome(Kind.CONTROL_CANCEL.code, Failure(Kind.CONTROL_CANCEL, f"run cancelled by a control-plane cancel: {stop}"))

    def _stop_phrase(self) -> str:
        waited = f"waited {format_duration(self.spec.grace_ms)} grace, " if self.spec.grace_ms is not None else ""
        return (
            f"sent SIGTERM to the process tree (capability scope: {self.container.soft_stop_scope}), "
            f"{waited}then hard-killed any survivors via the container"
        )

    def _emit_resource_summary(self) -> None:
        summary = self.container.resource_summary()
        self.events.emit("resource_summary", **summary._asdict())

    def _live_members(self) -> list[int] | None:
        """Members that have not exited yet (zombies awaiting a reaper do not count)."""
        self._reap_children()
        try:
            return [m.pid for m in self.read_member_list() if not m.zombie]
        except OSError:
            return None

    def _teardown(self, ending: Ending) -> None:
        loop = self.loop
        before = self._live_members()
        self.events.emit("cleanup_started", members_before=len(before or ()), read_error=before is None)
        graceful = ending.detail != "kill" and ending.kind not in (
            EndingKind.CHILD_EXIT,
            EndingKind.FOREGROUND,
            EndingKind.INTERNAL,
        )
        shutdown = self._soft_stop(len(before or ())) if graceful else None
        kill_error = False
        try:
            self.container.kill_all()
        except OSError:
            kill_error = True
        loop.run_until(lambda: self._live_members() == [], loop.clock() + KILL_CONFIRM_SECONDS, MEMBER_POLL_SECONDS)
        loop.run_until(lambda: self._returncode is not None, loop.clock() + KILL_CONFIRM_SECONDS, MEMBER_POLL_SECONDS)
        self._reap_children()  # a killed member the runner adopted is dead, not remaining
        try:
            remaining = sorted(self.container.member_pids())
            read_error = False
        except OSError:
            remaining, read_error = [], True
        self.events.emit(
            "cleanup_finished",
            remaining=len(remaining),
            remaining_pids=remaining,
            soft_terminate=None if shutdown is None else ("signalled" if shutdown["soft_signal"] == "sent" else "failed"),
            shutdown=shutdown,
            read_error=read_error,
            kill_error=kill_error,
        )

    def _soft_stop(self, members_before: int) -> dict:
        """SIGTERM to every member, then wait up to the grace for the tree to empty."""
        loop = self.loop
        started = loop.clock()
        try:
            self.container.signal_members(signal.SIGTERM)
            sent = True
        except OSError:
            sent = False
        drained = loop.run_until(
            lambda: self._live_members() == [], started + (self.spec.grace_ms or 0) / 1000, MEMBER_POLL_SECONDS
        )
        after = self._live_members()
        return {
            "soft_stop_scope": self.container.soft_stop_scope,
            "soft_signal": "sent" if sent else "failed",
            "members_before": members_before,
            "members_after": None if after is None else len(after),
            "drained_within_grace": drained,
            "escalated": not drained,
            "elapsed_ms": int((loop.clock() - started) * 1000),
        }

    def _drain_outputs(self) -> None:
        """Read the pipes to EOF now that the tree is gone, then flush the echo backlog.

        Bounded: a pipe held open by a process outside the container ends the drain once the
        runner has waited PUMP_DRAIN_SECONDS on the pipes, and an echo consumer that stops
        reading loses only the live echo. Time spent waiting for a slow but live consumer is not
        charged to the pipes (the bytes still in them would be lost), only to the overall
        DRAIN_CEILING_SECONDS.
        """
        loop = self.loop
        if self._stdin_feed is not None:
            self._stdin_feed.close()
        budget = PUMP_DRAIN_SECONDS
        ceiling = loop.clock() + DRAIN_CEILING_SECONDS
        while any(s.open for s in self.streams) and budget > 0 and loop.clock() < ceiling:
            for stream in self.streams:
                if stream.paused and stream.echo.drain(ECHO_STALL_SECONDS):
                    self._abandon_echo(stream)
            started = loop.clock()
            loop.run_until(lambda: not any(s.open and not s.paused for s in self.streams), started + budget, 0.05)
            budget -= loop.clock() - started
        for stream in self.streams:
            stream.close()
            if stream.echo is not None and stream.echo.drain(ECHO_STALL_SECONDS):
                self._abandon_echo(stream)

    def _abandon_echo(self, stream: OutputStream) -> None:
        _warn(f"the consumer of the runner's {stream.name} stopped reading; live echo abandoned")
        stream.echo.abandon()

    def _release(self) -> None:
        if self._keyboard is not None:
            self._keyboard.restore()
        if self._terminal is not None:
            self._terminal.close()
        problem = self._foreground.restore() if self._foreground is not None else None
        if problem is not None:
            _warn(f"could not give the terminal back to the runner's process group: {problem}")
        for stream in self.streams:
            if stream.echo is not None:
                stream.echo.close()
        for target in self._targets.values():
            os.close(target.fd)
        self.container.release()
        if self.rundir is not None:
            self.rundir.close()  # last: it is the evidence for everything above
        self.loop.close()

