"""``processkit-cli run``: the flags read into options and built into a RunSpec by the run
grammar (``grammar.run.build``), then handed to the engine."""

from __future__ import annotations

import os
import stat

from .. import caller_fds, signum
from ..errors import Failure, usage
from ..grammar import FLAGS, REPEAT
from ..grammar.run import RUN_OPTIONS, build, check_given
from ..spec import RunSpec
from .options import READY_FD_VARIABLE, parse_common, split_command, stdin_named

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .parsing import Parser


def build_parser() -> Parser:
    """The argparse parser for ``run``: what --help, usage errors, completion, the man pages and
    probe read. A plain run never builds it (see ``parse_common``)."""
    from .parsing import Parser

    parser = Parser(
        prog="processkit-cli run",
        usage="processkit-cli run [OPTIONS] --jsonl <FILE> -- <PROGRAM> [ARGS]...",
        description="Run one command, shell-free, inside a containment boundary.",
    )
    parser.add_options(RUN_OPTIONS)
    return parser


PARSERS = {"run": build_parser}  # command -> its parser (probe reads its flags from it)


def _command_from_stdin(args) -> list[str]:
    """The program is the first required unset field: stdin may carry the argv as JSON.

    Not when stdin belongs to the child (an input path that names it, ``/dev/fd/0`` as
    ``/dev/stdin``): there a missing program is an immediate error.
    """
    missing = usage("a program to run is required after '--'")
    inputs = (args.stdin_file, *(args.env_file or ()))
    if args.inherit_stdin or args.inherit_stdio or any(map(stdin_named, inputs)):
        raise missing
    from ..grammar.values import text_problem
    from .stdin_probe import probe_stdin

    text = probe_stdin("program argv")
    if text is None:
        raise missing
    try:
        from ..bounded import loads  # nested at most bounded.MAX_DEPTH, never a RecursionError

        command = loads(text)
    except ValueError:
        command = None
    if not isinstance(command, list) or not command or not all(isinstance(arg, str) for arg in command):
        raise usage("standard input must carry the command as a non-empty JSON array of strings")
    for index, arg in enumerate(command):
        # JSON's \uD800-\uDFFF escapes alone are no text (the reference's parser refuses them),
        # and a \u0000 would end the argument execve is given
        problem = text_problem(arg)
        if problem is not None:
            raise usage(
                f"the command read from standard input: argument {index} holds {problem}, which no argument can carry"
            )
    return command


def parse(argv: list[str]) -> RunSpec:
    options, command = split_command(argv)
    try:
        args = parse_common(RUN_OPTIONS, options) or build_parser().parse(options)
    except Failure as failure:
        raise _command_before_separator(failure, options, command) from None
    given = _given(args)
    check_given(given, FLAGS)  # before a command is read from stdin
    read = not command  # the command arrived on stdin, read to its end: none is left for the child
    if not command:
        command = _command_from_stdin(args)
    spec = build(tuple(command), given, FLAGS)
    if spec.pty and not (read or spec.detach or spec.stdin_file is not None):
        _say_stdin_unpassed()
    if spec.jsonl == "-":  # the reference's path, a file named "-": said, as an agent may expect stdout
        from ..diagnostics import warn

        warn("--jsonl - writes the events to a file named '-' in the working directory: they never go to stdout")
    return spec


def _command_before_separator(failure: Failure, options: list[str], command: list[str] | None) -> Failure:
    """A command typed with no ``--`` before it (``run --jsonl F echo hi``, a first run's most
    common slip) is argparse's "unrecognized arguments": said with where the command goes."""
    stray = "unrecognized arguments: "
    if command or not failure.message.startswith(stray) or failure.message[len(stray) :].startswith("-"):
        return failure
    import shlex  # this slip's alone: a run's start-up imports no ``re``

    words = failure.message[len(stray) :]
    shown = next(  # the stray words as the caller's shell took them: quoted again, never retyped
        (shlex.join(options[-count:]) for count in range(1, len(options) + 1) if " ".join(options[-count:]) == words),
        words,
    )
    where = f"the command goes after --: processkit-cli run --jsonl FILE -- {shown}"
    return usage(f"{failure.message} ({where})", hint=failure.hint)


def _say_stdin_unpassed() -> None:
    """A ``--pty`` run's terminal gets no input when the runner's stdin is not a terminal
    (docs/io-modes.md): said once when that stdin can carry input (a pipe, a FIFO, a socket, a
    non-empty regular file), not for a device (``/dev/null``, also a closed fd 0's, main.py) or a
    terminal. An ``fstat`` alone: the caller's stdin is never read, nor its flags changed (a
    ``while read`` loop around the runner keeps every line)."""
    try:
        info = os.fstat(0)
    except OSError:
        return
    mode = info.st_mode
    if stat.S_ISSOCK(mode):  # /dev/stdin cannot open a socket (ENXIO)
        kind, how = "a socket", "save it to a file and add --stdin-file FILE"
    elif stat.S_ISFIFO(mode) or (stat.S_ISREG(mode) and info.st_size > 0):
        kind, how = ("a pipe" if stat.S_ISFIFO(mode) else "a file"), "add --stdin-file /dev/stdin"
    else:
        return
    from ..diagnostics import warn

    warn(
        f"standard input is {kind}, not a terminal: --pty passes none of it to the child's terminal; to type it in, {how}"
    )


def _given(args) -> dict[str, object]:
    """The options ``args`` holds, by dest: a once-only option's text (True for a switch) when it
    was given (its ``_seen_`` mark), a repeatable one's texts when there is at least one."""
    found = vars(args)
    given = {key[6:]: found[key[6:]] for key in found if key.startswith("_seen_")}
    for dest in REPEATABLE:
        if found[dest]:
            given[dest] = found[dest]
    return given


REPEATABLE = tuple(option.dest for option in RUN_OPTIONS if option.kind == REPEAT)


def _take_ready_fd() -> int | None:
    """In a detached copy, the pipe its launcher waits on (``detach``): taken out of the
    environment so the child never sees it, and kept from the child's exec."""
    text = os.environ.pop(READY_FD_VARIABLE, None)
    if text is None:
        return None
    from ..grammar.values import is_digits

    if not is_digits(text) or len(text) > 9:
        return None
    fd = int(text)
    try:
        if fd <= 2 or not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None  # not a pipe a launcher made: nothing of the caller's is written to
        os.set_inheritable(fd, False)
    except OSError:
        return None
    caller_fds.withhold(fd)  # an input path naming it is refused: the launcher's, not the caller's
    return fd


def main(argv: list[str], invocation) -> int:
    ready_fd = _take_ready_fd()
    spec = parse(argv)
    if spec.run_id_given:
        invocation.run_id = spec.run_id
    if spec.detach:
        from .detach import launch

        launch(argv, spec)
        return 0
    from ..engine.runner import execute
    from ..context import RunContext

    from ..containment import has_children, may_have_escapees

    spare = None  # the caller's, before the run (one ``waitid`` says there is none): spared by the sweep after it
    if has_children():
        from ..containment.leftovers import inherited

        spare = inherited()
    from ..containment.accounting import ChildrenUsage

    nothing: frozenset[int] = frozenset()  # this process's one run: the orphans it collects are that run's
    ChildrenUsage.sole(*((nothing,) * 3 if spare is None else (spare.pids, spare.groups, spare.sessions)))
    # A detached copy passes none: its launcher gave it nothing of the caller's (cli/detach.py).
    passed = caller_fds.taken() if ready_fd is None else ()
    swept: list[int] = []  # a cgroup v2 run's teardown looked (``RunContext.escapees``): no look after it

    def escapees(holds: Callable[[int], bool]) -> list[int]:
        swept.append(1)
        if not may_have_escapees():
            return []  # the usual end: ``escaped`` not loaded
        from ..containment.escaped import LEFT_CGROUP, end_escapees

        return end_escapees(spare, left=LEFT_CGROUP, raises=True, holds=holds)

    # A foreground run goes on without a stream another run holds (``held_stream_skipped``); a
    # detached copy is refused, as its launcher is: the launcher proves the start by that stream.
    skipped = ready_fd is None
    context = RunContext(ready_fd=ready_fd, passed_fds=passed, escapees=escapees, held_stream_skipped=skipped)
    if signum.getsignal(signum.SIGINT) is signum.default_int_handler:
        # Until the host watches the stop signals (engine/launch.py), SIGINT ends the runner as
        # SIGTERM does, by its default (130), as the reference's does: Python's KeyboardInterrupt
        # ended the setup as an internal error (104 in the stream) and the runner with 107.
        signum.signal(signum.SIGINT, signum.SIG_DFL)
    remember: tuple[str, ...] = ()  # none: a stream to /dev/null is dropped unmade (events.emitter)
    if spec.capture_dir is not None:
        remember += ("output_captured", "output_overflow")
    cap = spec.limits.max_processes
    if cap is not None:  # its cap refuses a fork: the child's own words may be all
        remember += ("limit_evidence",)
    outcome = execute(spec, context, remember, leaks=True)  # what the root left running: _say_left_running
    if (
        not swept and may_have_escapees()
    ):  # a v2 run's teardown did not look (its root was never collected, or a fault cut it short)
        from ..containment import V2_PARENTS
        from ..containment.escaped import LEFT_GROUP, UNFINISHED, end_escapees

        # Its look comes only once the group's kill is confirmed; without it nothing shows that what
        # is found here left the group (a cut teardown's orphans are still in it): no cause named.
        end_escapees(spare, left=UNFINISHED if V2_PARENTS else LEFT_GROUP)
    _say_cut(outcome.remembered.get("output_captured"), outcome.remembered.get("output_overflow"), outcome.kept)
    _say_left_running(outcome.left_behind, spec)
    if cap is not None and (outcome.remembered.get("limit_evidence") or {}).get("processes") == "tripped":
        from ..diagnostics import warn
        from ..summary_line import pids_words

        warn(pids_words(cap, "the run's", "--max-processes"))
    if outcome.usage is not None:
        if outcome.usage.oom_kills:
            from ..diagnostics import warn
            from ..summary_line import oom_words

            warn(oom_words(outcome.usage.oom_kills, "this run's"))
        if spec.usage_file is not None:
            _write_usage(spec, outcome)
    if outcome.failure is not None:
        if context.ready_fd is not None:  # a detached copy that never started: its stderr is null
            _tell_launcher_why(context.ready_fd, outcome.failure.message)
        return invocation.fail(outcome.failure)
    return outcome.code


def _tell_launcher_why(fd: int, message: str) -> None:
    """The words of a detached copy's failure before its start, for its launcher to say (a
    setup failure's are in no event: ``could not set up output capture in `DIR`: ...``). Best effort."""
    try:
        os.write(fd, b"failed\t" + message.encode("utf-8", "replace")[:4000] + b"\n")
    except OSError:
        pass


def _say_cut(captured: dict | None, overflow: dict | None, kept: dict | None) -> None:
    """A capture cut at ``--capture-max-bytes`` or by a failed write said on stderr, as the API
    warns of a cut (``events.cuts``' words): the echo showed every byte, the file holds only
    some, and only ``output_captured`` said which. Not the stream whose cut ended the run
    (``overflow``, its ``output_overflow`` event: 113's line says it); a cut under
    ``--capture-overflow cancel`` that did not end it (the child's exit, a timeout or a signal
    won the race) is said as any. ``kept``: a ring capture's stream ranges, by stream (which
    part of it a file holds)."""
    if not captured:
        return
    from ..capture_layout import STREAMS
    from ..diagnostics import warn
    from ..events.cuts import capture_cuts

    streams = [(name, {**(captured.get(name) or {}), "kept": (kept or {}).get(name)}) for name in STREAMS]
    for line in capture_cuts(streams, (overflow or {}).get("stream"), "--capture-max-bytes")[0]:
        warn(line)


def _say_left_running(left: int | None, spec: RunSpec) -> None:
    """The child exited with ``left`` processes of its tree still running as the teardown began
    (``Outcome.left_behind``, batch's leak: counted at the tree's read before the teardown, one
    already dying left out), which the teardown ends at once, once the child's pipes are closed
    or the exit's wait for them is over (docs/run.md §3): what they would have written next is in
    no echo or capture file; under ``--pty`` or ``--inherit-stdio`` no pipe is read, and the
    child's exit ends the run at once. Human mode only. None: not counted, which the teardown's
    own warning says."""
    if not left:
        return
    from ..diagnostics import warn
    from ..engine.race import left_running

    warn(left_running(left, spec, ("--pty", "--inherit-stdio")))


def _write_usage(spec: RunSpec, outcome) -> None:
    """``--usage-file``: best effort, as the run has already ended; a failure is one warning.
    Never over the run's stream or a capture file (``--usage-file run.jsonl``): kept whole. Nor
    over its ``--jsonl`` file where another run writes it (``runner._without_stream``): that
    run's stream, which a usage file written by rename would take the path from."""
    from ..capture_layout import FILE_NAMES
    from ..containment.accounting import write_file
    from ..useroutputs import identities

    assert spec.usage_file is not None
    kept = {} if outcome.stream_file is None else {outcome.stream_file: "the --jsonl stream"}
    named = [] if spec.jsonl is None else [(spec.jsonl, "the --jsonl stream")]
    if spec.capture_dir is not None:
        named += ((os.path.join(spec.capture_dir, file), f"the {name} capture") for name, file in FILE_NAMES.items())
    kept.update(identities(named))
    try:
        write_file(spec.usage_file, outcome.usage, kept)
    except OSError as exc:
        from ..diagnostics import warn
        from ..useroutputs import unwritable

        warn(unwritable(spec.usage_file, exc, "could not write the usage file").message)
