"""Setup before spawn, and the spawn: everything a run makes before its race begins.

Setup follows the reference's fixed order (capture files, stdin source, environment, the terminal for
``--pty``, stop signals, run directory, container, publication); the first failure ends the run, and the
runner's release gives back whatever was made up to it. ``start`` spawns the child and reports it, and returns
what it launched (``Launched``), which the phases after it are handed; ``connect`` then builds the output
streams and input relays, so a failure there finds the child already reported, and ends through the teardown.
"""

from __future__ import annotations

import os
import time

from .. import containment, rlimits
from ..diagnostics import warn
from ..errors import Failure, Kind, os_error_words, setup_failure
from ..events.argv import command_object
from ..events.base import RunStarted  # the rarer types load where written (events/base.py)
from ..rundir import RunDir
from ..spec import StdinMode, shown_cwd
from . import publishing, pump, spawn
from .callers_umask import made, under
from .endings import EndingKind
from .environment import build_environment
from .host import Host
from .snapshot import emit_snapshot
from .state import Launched, RunState
from .streams import OutputStream
from .waits import until_readable

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotations: these modules are imported by batches and --pty runs alone
    from ..control.lodging import Lodging
    from ..control.publication import Publication
    from ..context import RunContext
    from .pty import PseudoTerminal


def _make_rundir() -> RunDir | None:
    """The run's directory and liveness lock, made before any group; best effort."""
    try:
        return RunDir()
    except OSError as exc:
        warn(f"no run directory, so nothing this run leaves can be reaped if its runner dies: {os_error_words(exc)}")
        return None


def prepare(host: Host, run: RunState) -> None:
    """Setup steps in the reference's fixed order; the first failure ends the run."""
    spec, context = run.spec, run.context
    held = context.held_fds
    held_capture = held if held is not None and len(held) == 3 else None  # else the stream's alone
    if held_capture is not None:  # first: from here the release closes them
        import processkit.engine.capture as capture  # not ``from .``: containment.__init__'s ``_lender`` says why

        run.targets = capture.held_targets(spec, run.capture_dir, (held_capture[1], held_capture[2]))
    run.pump_backend, run.spawn_backend = _backends(host)
    # A host carrying one run pays a thread per captured pipe from its start; a batch's many
    # short jobs would pay it for nothing (streams.py's facts about pipes).
    run.unpolled_pipes = host.alone
    if held_capture is None and run.capture_dir is not None:
        import processkit.engine.capture as capture

        try:
            run.targets = made(
                context,
                spec.capture_dir,
                capture.run_targets,
                run.capture_dir,
                spec.capture_max_bytes,
                spec.capture_keep,
                captured=context.captured,
                events_file=run.events.identity,
                locked=not context.stream_guarded,
                key=run.events.key,
            )
        except OSError as exc:
            raise setup_failure(f"could not set up output capture in `{run.capture_dir}`", exc) from None
    if spec.stdin is StdinMode.FILE:
        assert spec.stdin_file is not None, "the CLI sets the file with the mode"
        stdin_file = context.place(spec.stdin_file)
        from .stdin_feed import open_source

        try:
            run.stdin_source = open_source(stdin_file, own=stdin_file != spec.stdin_file)
        except OSError as exc:
            raise setup_failure(f"could not open stdin file `{stdin_file}`", exc) from None
    if spec.cwd and not spec.cwd_implicit:
        run.cwd_fd, run.cwd_missing = _judge_cwd(os.path.join(run.runner_cwd, spec.cwd))
    run.env = build_environment(spec.env, spec.run_id, run.context.env, alone=host.alone)
    if spec.pty:
        run.env, run.terminal = _open_terminal(run.env, spec.pty_size, run.context)
    # From here the runner makes things on the host (a cgroup, a registry entry, a socket):
    # a stop signal must end the run through their release, not kill the runner and orphan
    # them. The steps above make nothing that needs a release; the one that can wait (an
    # --env-file FIFO read to its end) keeps the default, so a signal still ends that wait.
    host.watch_signals(run.terminal.follow_caller if run.terminal is not None else None)
    run.rundir = host.lodging.slot() if host.lodging is not None else _make_rundir()
    try:
        container = run.container = containment.create(spec.limits, run.rundir, host.may_adopt_orphans)
    except containment.OutOfDescriptors:  # the limit's, not the boundary's: no ``container_failed``
        from ..fdlimit import out_of_descriptors

        raise out_of_descriptors("to set up the run's boundary") from None
    except containment.ContainerError as exc:
        from ..events.types import ContainerFailed, LimitHit

        # The stderr line leads with the reference's words (its tests grep "resource limit").
        headline = "could not create the ProcessKit container"
        if isinstance(exc, containment.LimitUnavailable):
            run.events.emit(LimitHit(limit=exc.limit, detail=exc.detail))
            headline = "could not apply the requested resource limit"
        run.events.emit(ContainerFailed(phase="create", code=Kind.CONTAINER_ERROR.code, message=str(exc)))
        raise Failure(Kind.CONTAINER_ERROR, f"{headline}: {exc}") from None
    if context.publish_after_ms is None:
        run.publication = _publish(run, container, host.lodging)


def _judge_cwd(cwd: str) -> tuple[int | None, OSError | None]:
    """The child's working directory a caller named (``--cwd``, a manifest job's ``cwd``, the
    API's ``cwd=``) reached as an input is (``userwalk.input_directory``), at every run: another
    user's link at its name, or in a sticky directory on the way, is refused (111), never followed
    to where that user chose for the child's relative writes; any other failure of the walk refuses
    the run, never lets it go on unjudged. Returns the directory's handle: the child changes to it
    (``fchdir``), never to the name again, which another user could change meanwhile (``start``
    closes it). Or, for a directory missing or a file, why: ``start`` says it as the spawn's chdir
    did (101), and takes the name no more (their link put there since would be followed)."""
    from ..userwalk import input_directory  # here: a run without a named cwd loads no ``userfiles``

    try:
        return input_directory(cwd)[0], None
    except (FileNotFoundError, NotADirectoryError) as exc:
        return None, exc
    except OSError as exc:  # another user's link (``UnsafePath``), or the walk's own failure (EMFILE)
        raise setup_failure(f"could not use the working directory `{cwd}`", exc) from None


def _backends(host: Host) -> tuple[str, str]:
    """The pump's and the spawn's backends, chosen at the host's first run and kept for the
    rest: they follow the process's environment and build, the same for every run it carries
    (a batch's thousands asked three environment reads and a native call each). A choice that
    fails (native demanded, not built) is not kept: each run fails its set-up as the first did."""
    chosen = host.backends
    if chosen is None:
        chosen = host.backends = (pump.select_backend(), spawn.select_backend())
    return chosen


def _open_terminal(
    env: dict[str, str], size: tuple[int, int] | None, context: RunContext
) -> tuple[dict[str, str], PseudoTerminal]:
    from .pty import PseudoTerminal, with_default_term

    try:
        return with_default_term(env), PseudoTerminal(size, (context.fd(0), context.fd(1), context.fd(2)))
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot open a pseudo-terminal for --pty: {exc.strerror}") from None


def start(host: Host, run: RunState):
    """Spawn the child into the container ``prepare`` made and report it (``run_started``, the
    spawn snapshot); returns what exists then (``Launched``). A step that yields: the host's
    other runs go on while the child execs (``_exec_reported``)."""
    spec, context = run.spec, run.context
    cwd = os.path.join(run.runner_cwd, spec.cwd) if spec.cwd else spec.cwd  # "" (the API's): its chdir fails
    container = run.container
    assert container is not None, "prepare makes the container or raises"
    host.dispatch_caught_signals()
    if EndingKind.SIGNAL in run.pending:  # stopped during setup: the child never starts
        raise _cancelled(run)
    live = None
    if run.targets and run.ring_record:
        assert run.capture_dir is not None, "a ring record is written in the capture directory"
        from . import capture  # the ring's live record, before the child can write a byte (capture_layout.py)

        live = made(context, spec.capture_dir, capture.record_rings, run.targets, run.capture_dir, spec.run_id)
    lends = spec.stdin is StdinMode.INHERIT and os.isatty(context.fd(0))  # else no terminal to lend
    lend_modes = None
    if lends:
        from .terminal import read_modes

        lend_modes = read_modes(context.fd(0))  # before a child quick to set raw mode can
    spawning_ns = time.monotonic_ns()  # the child's life starts with its fork: its groups count from there
    try:
        if run.cwd_missing is not None:  # where the spawn failed it, in its words
            from ..spawn_words import Asked, failure

            number = run.cwd_missing.errno or 0
            raise failure("cwd", os.strerror(number), number, Asked(spec.argv, run.env, cwd, container.mechanism))
        starting = under(  # the child takes its caller's umask and limits, as subprocess's does (``callers_umask``)
            context.umask,
            rlimits.given,
            context.limits,
            spawn.begin,
            spec.argv,
            env=run.env,
            cwd=cwd,
            container=container,
            stdin=spec.stdin,
            pipe_output=not spec.inherit_stdio and context.output_fd is None,
            output_fd=context.output_fd,
            given=context.child_fds,
            merged=spec.stderr_to_stdout,
            backend=run.spawn_backend,
            terminal=run.terminal.take_slave() if run.terminal is not None else None,
            inherit=context.stdio,
            linger_ms=context.linger_ms,
            passed=context.passed_fds,
            cwd_fd=run.cwd_fd,
        )
        run.close_cwd()  # the child's own copy from the clone on; a spawn that failed: the release's
        container.cloned(starting.pid)  # its group known before the exec's report (a Ctrl-Z meanwhile)
        try:
            containment.restart_ahead(run.rundir)  # while the child execs: the next run's groups made ready
            yield from _exec_reported(host, run, starting)
        except BaseException:  # closed from outside, a bug, an interrupt: the child goes with the run
            starting.abandon()
            raise
        child = starting.child()
    except (Failure, spawn.AttachError) as problem:
        if live is not None:  # no child, nothing captured: no live record left behind
            live.forget()
        if isinstance(problem, Failure) and problem.kind is not Kind.CANCELLED:  # a stop, not a failed spawn
            from ..events.types import SpawnFailed
            from ..spawn_words import ProgramRefused

            said = problem.said if isinstance(problem, ProgramRefused) else problem.message
            run.events.emit(SpawnFailed(code=problem.code, message=said))
        raise
    launched = Launched(container, child, spawning_ns)
    launched.lend_modes = lend_modes
    run.root_pid = child.pid
    container.adopt(child.pid)
    if context.publish_after_ms is not None:  # cancelled with the run's other timers when it ends first
        run.timers["publish"] = run.loop.call_later(
            context.publish_after_ms / 1000, lambda: _publish_late(run, container, host.lodging, spawning_ns)
        )
    if lends:
        from .terminal import Foreground, HandoffError

        try:
            launched.foreground = Foreground.lend(child.pid, run.context.fd(0), lend_modes)
        except HandoffError as exc:  # ends the run before its race: no run_started
            launched.handoff = str(exc)
            return launched
        from . import lending

        run.continued_hook = run.loop.waking(lambda: lending.lend_again(run, launched))  # a fault: the run's own
        if host.alone:  # the API's service is in its caller's group: its stop would stop every run
            host.watch_child_stops(run, run.loop.waking(lambda: lending.stopped_in_front(host, run, launched)))
        if launched.foreground is None and launched.handoff is None:
            lending.lend_when_foreground(run, launched, first=True)
    if run.events.writing:  # the event, and the members read for the snapshot, would be dropped
        run.events.emit(
            RunStarted(
                run_id=spec.run_id,
                labels=dict(sorted(spec.labels)),
                root_pid=child.pid,
                mechanism=container.mechanism,
                abrupt_cleanup=container.abrupt_cleanup,
                cwd=shown_cwd(cwd if cwd is not None else run.runner_cwd),
                command=command_object(spec.argv, raw=spec.argv_raw),
            )
        )
    _tell_launcher(run.context, run.events.failure)
    if run.events.writing:
        emit_snapshot(run, "spawn")
    return launched


def _exec_reported(host: Host, run: RunState, starting: spawn.Starting):
    """Wait for the native child's exec to be reported. On a host that carries one run for good
    (the CLI's ``run``) the run waits in the spawn itself (no loop turn to pay for); on one that
    may carry others (the API's service, a batch), even those that come later, it yields until
    the exec's report is readable, and the host carries them meanwhile: the exec of a large
    program, or of one on a slow file system, holds up no other run (``start`` abandons the
    child if the run is closed meanwhile). A run that lingers (``bench``'s: its host
    carries one run at a time, and the spawn holds it for the command's exit anyway) waits in
    the spawn too. Either wait ends at a stop signal while the child is still in its exec
    (``_cancelled``)."""
    stopped = lambda: EndingKind.SIGNAL in run.pending  # noqa: E731 - asked at each look and wake
    if host.alone or run.context.linger_ms:
        if not host.exec_waited(starting, stopped):
            raise _cancelled(run)
        return
    while not starting.ready():  # a look may find the exec the pipe's end of file does not tell
        if stopped():
            raise _cancelled(run)
        watch = starting.watch()
        assert watch is not None, "not ready: still pending"
        fd, poll = watch
        # A poll (a copy of the pipe's end may be held by a fork elsewhere) is a deadline: the
        # look at the top of this loop is what may move the wait on, not the fd alone. The fd
        # leaves the loop before the spawn's finish closes it.
        deadline = run.loop.clock() + poll
        yield from until_readable(run.loop, fd, stopped, deadline)


def _cancelled(run: RunState) -> Failure:
    """A stop signal before the child started: in setup, or while the child is still in its exec
    (``start`` kills it then). A child held in its execve (a hung mount, a lease) would otherwise
    hold the run, deaf to the signal, until its exec ended; one whose exec is reported by then
    runs, and its race takes the signal."""
    from .endings import not_started

    return Failure(Kind.CANCELLED, not_started(run.pending[EndingKind.SIGNAL]))


def connect(run: RunState, launched: Launched) -> None:
    """The child's output streams (pump, echo, capture) and what feeds its input: the
    ``--stdin-file`` relay, or the caller's keys for a ``--pty`` run."""
    spec, child, terminal = run.spec, launched.child, run.terminal
    streams = launched.streams
    if terminal is not None:  # one stream: what the terminal emits, reported as stdout
        echo_fd = run.context.fd(1) if spec.echo else None
        streams.append(OutputStream(run, "stdout", terminal.endpoint(), run.targets.get("stdout"), echo_fd, pty=True))
    elif not spec.inherit_stdio and run.context.output_fd is None:
        echo = spec.echo
        context = run.context
        for name, fd, own_fd in (("stdout", child.stdout, context.fd(1)), ("stderr", child.stderr, context.fd(2))):
            if fd is None:  # the API gave the child a descriptor of its own, or stderr=STDOUT
                continue
            streams.append(OutputStream(run, name, fd, run.targets.get(name), own_fd if echo else None))
    if run.stdin_source is not None:
        from .stdin_feed import StdinFeed

        if terminal is not None:
            launched.stdin_feed = StdinFeed(run.loop, run.stdin_source, terminal.endpoint(), terminal.end_of_input)
        else:
            assert child.stdin is not None, "spawn pipes stdin for --stdin-file"
            launched.stdin_feed = StdinFeed(run.loop, run.stdin_source, child.stdin)
        run.stdin_source = None
    elif terminal is not None:
        from .lending import take_keyboard

        take_keyboard(run, launched)


def _tell_launcher(context: RunContext, jsonl_failure: str | None) -> None:
    """A detached copy tells its launcher the run started through a pipe as well as the JSONL, which
    may be failing (``/dev/full``) while the run is healthy: ``started``, and why the JSONL stopped if it did."""
    fd, context.ready_fd = context.ready_fd, None  # closed: still set after the run, it never started (``cli/run.py``)
    if fd is not None:
        line = "started" if jsonl_failure is None else f"started\t{jsonl_failure}"
        try:
            os.write(fd, line.encode("utf-8", "replace") + b"\n")
        except OSError:  # best effort: a launcher that is gone has nothing left to learn
            pass
        os.close(fd)


def _publish_late(run: RunState, container: containment.Container, lodging: Lodging | None, spawning_ns: int) -> None:
    """``_publish`` once the child has run the context's ``publish_after_ms`` (``publishing.late``)."""
    run.publication = publishing.late(
        lambda started_ns: _publish(run, container, lodging, started_ns), spawning_ns, run.said
    )


def _publish(
    run: RunState, container: containment.Container, lodging: Lodging | None, started_ns: int | None = None
) -> Publication | None:
    """Register the run and open its control socket (``publishing.register``). (Every run
    publishes, so its module is imported with this one, not at each run.)"""
    spec, context = run.spec, run.context
    jsonl, root_pid = context.place(spec.jsonl), lambda: run.root_pid
    return publishing.register(
        run.loop, spec, jsonl, run.capture_dir, run.runner_cwd, container, run.rundir, root_pid,
        run.read_member_list, run.control_stop, lodging, started_ns, said=run.said, jsonl_held=run.events.withheld,
    )  # fmt: skip
