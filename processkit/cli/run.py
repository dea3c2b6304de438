"""``processkit-cli run``: parse and validate the flags into a RunSpec, then hand it to the engine."""

from __future__ import annotations

import functools
import os
import time

from ..errors import usage
from ..spec import DEFAULT_CAPTURE_MAX_BYTES, EnvPlan, Limits, OverflowPolicy, RunSpec, StdinMode
from . import values
from .parsing import Once, OnceFlag, Parser, flag_given, split_command

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
        ),
    ),
    ("detach", ("inherit_stdin",)),
    ("inherit_stdin", ("stdin_file",)),
    ("pty", ("inherit_stdio", "inherit_stdin")),
    ("windows_graceful_ctrl_break", ("create_no_window", "detach")),
)
REQUIRES_CAPTURE_DIR = ("capture_max_bytes", "capture_overflow")
REQUIRES_PTY = ("pty_size",)


@functools.cache  # parsers are reusable; the Python API parses once per call
def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli run",
        usage="processkit-cli run [OPTIONS] --jsonl <FILE> -- <PROGRAM> [ARGS]...",
        description="Run one command, shell-free, inside a containment boundary.",
    )
    add = parser.add_argument
    add("--run-id", action=Once, metavar="ID")
    add("--label", action="append", default=[], metavar="K=V", help="repeatable")
    add("--cwd", action=Once, metavar="DIR")
    add("--jsonl", action=Once, metavar="FILE", help="lifecycle events (required)")
    add("--timeout", action=Once, metavar="DUR")
    add("--idle-timeout", action=Once, metavar="DUR")
    add("--grace", action=Once, metavar="DUR")
    add("--snapshot-interval", action=Once, metavar="DUR")
    add("--max-memory", action=Once, metavar="SIZE")
    add("--max-processes", action=Once, metavar="N")
    add("--cpu-quota", action=Once, metavar="CORES")
    add("--capture-dir", action=Once, metavar="DIR")
    add("--capture-max-bytes", action=Once, metavar="SIZE")
    add("--capture-overflow", action=Once, choices=("truncate", "cancel"))
    add("--inherit-stdio", action=OnceFlag)
    add("--inherit-stdin", action=OnceFlag)
    add("--stdin-file", action=Once, metavar="FILE")
    add("--pty", action=OnceFlag, help="the child's stdin, stdout and stderr are a new pseudo-terminal")
    add(
        "--pty-size",
        action=Once,
        metavar="COLSxROWS",
        help="the child terminal's size (default: the caller's terminal, else 80x24)",
    )
    add("--no-echo", action=OnceFlag)
    add("--detach", action=OnceFlag)
    add("--argv-raw", action=OnceFlag)
    add("--env-clear", action=OnceFlag)
    add("--env-remove", action="append", default=[], metavar="K", help="repeatable")
    add("--env-file", action="append", default=[], metavar="FILE", help="repeatable")
    add("--env", action="append", default=[], metavar="K=V", help="repeatable")
    add("--run-id-env", action=Once, metavar="K")
    add("--create-no-window", action=OnceFlag, help="Windows only; accepted and ignored elsewhere")
    add("--windows-graceful-ctrl-break", action=OnceFlag, help="Windows only; accepted and ignored elsewhere")
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
    from .stdin_probe import probe_stdin

    text = probe_stdin("program argv")
    if text is None:
        raise missing
    try:
        import json

        command = json.loads(text)
    except ValueError:
        command = None
    if not isinstance(command, list) or not command or not all(isinstance(arg, str) for arg in command):
        raise usage("standard input must carry the command as a non-empty JSON array of strings")
    return command


def parse(argv: list[str]) -> RunSpec:
    options, command = split_command(argv)
    args = build_parser().parse(options)
    _check_conflicts(args)
    if args.jsonl is None:
        raise usage("the required argument '--jsonl <FILE>' was not provided")
    if not command:
        command = _command_from_stdin(args)
    dur = values.parse_duration_ms
    run_id_given = args.run_id is not None
    run_id = values.parse_run_id(args.run_id) if run_id_given else f"run-{os.getpid()}-{time.time_ns()}"
    labels = dict(values.parse_label(text) for text in args.label)
    assignments = tuple(values.parse_env_assignment(text) for text in args.env)
    run_id_key = values.parse_env_key(args.run_id_env, flag="--run-id-env") if args.run_id_env is not None else None
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
        timeout_ms=dur(args.timeout, positive=True, flag="--timeout") if args.timeout is not None else None,
        idle_timeout_ms=dur(args.idle_timeout, positive=True, flag="--idle-timeout")
        if args.idle_timeout is not None
        else None,
        grace_ms=dur(args.grace, positive=False, flag="--grace") if args.grace is not None else None,
        snapshot_interval_ms=(
            dur(args.snapshot_interval, positive=True, flag="--snapshot-interval")
            if args.snapshot_interval is not None
            else None
        ),
        env=EnvPlan(
            clear=args.env_clear,
            remove=tuple(values.parse_env_key(key, flag="--env-remove") for key in args.env_remove),
            files=tuple(args.env_file),
            assignments=assignments,
            run_id_key=run_id_key,
        ),
        limits=Limits(
            max_memory=values.parse_size(args.max_memory, flag="--max-memory") if args.max_memory is not None else None,
            max_processes=values.parse_max_processes(args.max_processes) if args.max_processes is not None else None,
            cpu_quota=values.parse_cpu_quota(args.cpu_quota) if args.cpu_quota is not None else None,
        ),
        capture_dir=args.capture_dir,
        capture_max_bytes=(
            values.parse_size(args.capture_max_bytes, flag="--capture-max-bytes")
            if args.capture_max_bytes is not None
            else DEFAULT_CAPTURE_MAX_BYTES
        ),
        capture_overflow=OverflowPolicy(args.capture_overflow or "truncate"),
        stdin=stdin,
        stdin_file=args.stdin_file,
        inherit_stdio=args.inherit_stdio,
        pty=args.pty,
        pty_size=values.parse_pty_size(args.pty_size) if args.pty_size is not None else None,
        echo=not args.no_echo,
        argv_raw=args.argv_raw,
        detach=args.detach,
    )


def main(argv: list[str], invocation) -> int:
    spec = parse(argv)
    if spec.run_id_given:
        invocation.run_id = spec.run_id
    if spec.detach:
        from .detach import launch

        launch(argv, spec)
        return 0
    from ..engine.runner import execute

    outcome = execute(spec)
    if outcome.failure is not None:
        return invocation.fail(outcome.failure)
    return outcome.code
