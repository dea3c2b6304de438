"""``processkit-cli run``: parse and validate the flags into a RunSpec, then hand it to the engine."""

from __future__ import annotations

import os
import stat

from ..errors import usage
from ..spec import (
    DEFAULT_CAPTURE_MAX_BYTES,
    U32_MAX,
    KEEP_MODES,
    EnvPlan,
    Limits,
    OverflowPolicy,
    RunSpec,
    StdinMode,
    new_run_id,
)
from ..grammar import values
from .options import READY_FD_VARIABLE, REPEAT, SWITCH, VALUE, Option, flag_given, parse_common, split_command

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .parsing import Parser

# (flag, conflicts) for --inherit-stdio and the other declared conflicts (docs/run.md §2.3).
CONFLICTS = (
    (
        "inherit_stdio",
        (
            "capture_dir",
            "create_no_window",
            "idle_timeout",
            "inherit_stdin",
            "stdin_file",
            "no_echo",
            "detach",
            "capture_max_bytes",
            "capture_overflow",
            "capture_keep",
        ),
    ),
    ("detach", ("inherit_stdin",)),
    ("inherit_stdin", ("stdin_file",)),
    ("pty", ("inherit_stdio", "inherit_stdin")),
    ("windows_graceful_ctrl_break", ("create_no_window", "detach")),
)
REQUIRES_CAPTURE_DIR = ("capture_max_bytes", "capture_overflow", "capture_keep")
REQUIRES_PTY = ("pty_size",)


# Every run flag, in --help order: the direct parser and the argparse parser both read it.
RUN_OPTIONS = (
    Option("--run-id", VALUE, metavar="ID", help="the id clients find the run by (default: run-<pid>-<nanos>)"),
    Option("--label", REPEAT, metavar="K=V", help="a label clients can select the run by; repeatable (default: none)"),
    Option("--cwd", VALUE, metavar="DIR", help="the child's working directory (default: the runner's)"),
    Option("--jsonl", VALUE, metavar="FILE", help="where the lifecycle events go, one JSON line each (required)"),
    Option("--timeout", VALUE, metavar="DUR", help="end the run (106) after this long (default: no limit)"),
    Option(
        "--idle-timeout",
        VALUE,
        metavar="DUR",
        help="end the run (106) when the child writes no output for this long (default: no limit)",
    ),
    Option(
        "--grace",
        VALUE,
        metavar="DUR",
        help="how long a stopped tree gets between SIGTERM and the kill (default: none, killed at once)",
    ),
    Option(
        "--snapshot-interval",
        VALUE,
        metavar="DUR",
        help="also write a members_snapshot event this often (default: only the one at spawn)",
    ),
    Option("--max-memory", VALUE, metavar="SIZE", help="cap the whole tree's memory (default: no cap)"),
    Option("--max-processes", VALUE, metavar="N", help="cap the number of processes in the tree (default: no cap)"),
    Option("--cpu-quota", VALUE, metavar="CORES", help="cap the tree's CPU time, in cores (default: no cap)"),
    Option(
        "--capture-dir",
        VALUE,
        metavar="DIR",
        help="capture the output to DIR/stdout.log and DIR/stderr.log, made if missing (default: no capture)",
    ),
    Option(
        "--capture-max-bytes",
        VALUE,
        metavar="SIZE",
        help="how much of each stream the capture files keep (default: 8m); needs --capture-dir",
    ),
    Option(
        "--capture-overflow",
        VALUE,
        choices=("truncate", "cancel"),
        help="past the cap, keep running (truncate, the default) or end the run (cancel, 113)",
    ),
    Option(
        "--capture-keep",
        VALUE,
        choices=KEEP_MODES,
        help="which part of each stream its file keeps: head (default), tail, or head-tail (half the cap each)",
    ),
    Option(
        "--inherit-stdio",
        SWITCH,
        help="give the child the runner's stdin, stdout and stderr as they are: no echo, no capture (default: off)",
    ),
    Option("--inherit-stdin", SWITCH, help="give the child the runner's stdin (default: /dev/null)"),
    Option("--stdin-file", VALUE, metavar="FILE", help="feed the child's stdin from FILE (default: /dev/null)"),
    Option("--pty", SWITCH, help="the child's stdin, stdout and stderr are a new pseudo-terminal (default: off)"),
    Option(
        "--pty-size",
        VALUE,
        metavar="COLSxROWS",
        help="the child terminal's size (default: the caller's terminal, else 80x24); needs --pty",
    ),
    Option(
        "--no-echo", SWITCH, help="do not echo the child's output to the runner's stdout and stderr (default: echo)"
    ),
    Option(
        "--detach",
        SWITCH,
        help="return once the child has started, leaving the run in the background (default: wait for its end)",
    ),
    Option(
        "--argv-raw",
        SWITCH,
        help="put the raw argv in run_started (default: only its SHA-256 and a hint, argv may hold secrets)",
    ),
    Option("--env-clear", SWITCH, help="start the child's environment empty (default: the runner's)"),
    Option("--env-remove", REPEAT, metavar="K", help="remove K from the child's environment; repeatable"),
    Option(
        "--env-file", REPEAT, metavar="FILE", help="add the K=V lines of FILE to the child's environment; repeatable"
    ),
    Option("--env", REPEAT, metavar="K=V", help="set K in the child's environment; repeatable"),
    Option("--run-id-env", VALUE, metavar="K", help="also give the child its run id as K (default: not given)"),
    Option("--create-no-window", SWITCH, help="Windows only; accepted and ignored elsewhere"),
    Option("--windows-graceful-ctrl-break", SWITCH, help="Windows only; accepted and ignored elsewhere"),
    Option(
        "--usage-file",
        VALUE,
        metavar="FILE",
        help="extension: write the run's whole accounting (every figure, and its counter) to FILE as JSON",
    ),
)


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


def _check_conflicts(args) -> None:
    for flag, others in CONFLICTS:
        if not flag_given(args, flag):
            continue
        for other in others:
            if flag_given(args, other):
                raise usage(
                    f"the argument '--{flag.replace('_', '-')}' cannot be used with '--{other.replace('_', '-')}'"
                )
    for flag in REQUIRES_CAPTURE_DIR:
        if flag_given(args, flag) and not flag_given(args, "capture_dir"):
            raise usage(f"the argument '--{flag.replace('_', '-')}' requires '--capture-dir'")
    for flag in REQUIRES_PTY:
        if flag_given(args, flag) and not flag_given(args, "pty"):
            raise usage(f"the argument '--{flag.replace('_', '-')}' requires '--pty'")


def _command_from_stdin(args) -> list[str]:
    """The program is the first required unset field: stdin may carry the argv as JSON.

    Not when stdin belongs to the child: there a missing program is an immediate error.
    """
    missing = usage("a program to run is required after '--'")
    if args.inherit_stdin or args.inherit_stdio or args.stdin_file == "/dev/stdin":
        raise missing
    from ..text import uncarried
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
        problem = uncarried(arg)
        if problem is not None:
            raise usage(
                f"the command read from standard input: argument {index} holds {problem}, which no argument can carry"
            )
    return command


def parse(argv: list[str], ready_fd: int | None = None) -> RunSpec:
    options, command = split_command(argv)
    args = parse_common(RUN_OPTIONS, options) or build_parser().parse(options)
    _check_conflicts(args)
    if args.jsonl is None:
        raise usage("the required argument '--jsonl <FILE>' was not provided")
    if not command:
        command = _command_from_stdin(args)
    dur = values.parse_duration_ms
    run_id_given = args.run_id is not None
    run_id = values.parse_run_id(args.run_id) if run_id_given else new_run_id()
    labels = dict(values.parse_label(text) for text in args.label)
    assignments = tuple(values.parse_env_assignment(text) for text in args.env)
    run_id_key = values.parse_env_key(args.run_id_env, "--run-id-env") if args.run_id_env is not None else None
    if run_id_key is not None and any(key == run_id_key for key, _ in assignments):
        raise usage(
            f"'--run-id-env {run_id_key}' conflicts with '--env {run_id_key}=...': the run id variable is set by the runner"
        )
    stdin = StdinMode.NULL
    if args.inherit_stdin or args.inherit_stdio:
        stdin = StdinMode.INHERIT
    elif args.stdin_file is not None:
        stdin = StdinMode.FILE
    return RunSpec(
        argv=tuple(command),
        jsonl=args.jsonl,
        run_id=run_id,
        run_id_given=run_id_given,
        labels=tuple(sorted(labels.items())),
        cwd=args.cwd,
        timeout_ms=dur(args.timeout, "--timeout", positive=True) if args.timeout is not None else None,
        idle_timeout_ms=dur(args.idle_timeout, "--idle-timeout", positive=True)
        if args.idle_timeout is not None
        else None,
        grace_ms=dur(args.grace, "--grace", positive=False) if args.grace is not None else None,
        snapshot_interval_ms=(
            dur(args.snapshot_interval, "--snapshot-interval", positive=True)
            if args.snapshot_interval is not None
            else None
        ),
        env=EnvPlan(
            clear=args.env_clear,
            remove=tuple(values.parse_env_key(key, "--env-remove") for key in args.env_remove),
            files=tuple(args.env_file),
            assignments=assignments,
            run_id_key=run_id_key,
        ),
        limits=Limits(
            max_memory=values.parse_size(args.max_memory, "--max-memory") if args.max_memory is not None else None,
            max_processes=values.parse_count(args.max_processes, "--max-processes", low=1, high=U32_MAX)
            if args.max_processes is not None
            else None,
            cpu_quota=values.parse_cpu_quota(args.cpu_quota) if args.cpu_quota is not None else None,
        ),
        capture_dir=args.capture_dir,
        capture_max_bytes=(
            values.parse_size(args.capture_max_bytes, "--capture-max-bytes")
            if args.capture_max_bytes is not None
            else DEFAULT_CAPTURE_MAX_BYTES
        ),
        capture_overflow=OverflowPolicy.CANCEL if args.capture_overflow == "cancel" else OverflowPolicy.TRUNCATE,
        capture_keep=args.capture_keep or "head",
        stdin=stdin,
        stdin_file=args.stdin_file,
        inherit_stdio=args.inherit_stdio,
        pty=args.pty,
        pty_size=values.parse_pty_size(args.pty_size) if args.pty_size is not None else None,
        echo=not args.no_echo,
        argv_raw=args.argv_raw,
        detach=args.detach,
        ready_fd=ready_fd,
        usage_file=args.usage_file,
    )


def _take_ready_fd() -> int | None:
    """In a detached copy, the pipe its launcher waits on (``detach``): taken out of the
    environment so the child never sees it, and kept from the child's exec."""
    text = os.environ.pop(READY_FD_VARIABLE, None)
    if text is None or not values.is_digits(text) or len(text) > 9:
        return None
    fd = int(text)
    try:
        if fd <= 2 or not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None  # not a pipe a launcher made: nothing of the caller's is written to
        os.set_inheritable(fd, False)
    except OSError:
        return None
    return fd


def main(argv: list[str], invocation) -> int:
    spec = parse(argv, ready_fd=_take_ready_fd())
    if spec.run_id_given:
        invocation.run_id = spec.run_id
    if spec.detach:
        from .detach import launch

        launch(argv, spec)
        return 0
    from ..engine.runner import execute

    outcome = execute(spec)
    if outcome.usage is not None:
        if outcome.usage.oom_kills:
            from ..diagnostics import warn

            warn(f"the kernel's OOM killer ended {outcome.usage.oom_kills} process(es) of this run's tree")
        if spec.usage_file is not None:
            _write_usage(spec.usage_file, outcome.usage)
    if outcome.failure is not None:
        return invocation.fail(outcome.failure)
    return outcome.code


def _write_usage(path: str, usage) -> None:
    """``--usage-file``: best effort, as the run has already ended; a failure is one warning."""
    from ..containment.accounting import write_file

    try:
        write_file(path, usage)
    except OSError as exc:
        from ..diagnostics import warn

        warn(f"cannot write --usage-file {path}: {exc.strerror}")
