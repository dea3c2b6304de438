"""``run``'s options: every flag in ``--help`` order, what each conflicts with or requires, and the
grammar of each one's values. The CLI's parsers, the API's keywords and a manifest's keys all read
this one table (``table.Option``); ``build`` checks and assembles what they give."""

from __future__ import annotations

from ..spec import KEEP_MODES, U32_MAX
from . import values
from .table import REPEAT, SWITCH, VALUE, Option


def _positive_duration(value, name: str) -> int:
    return values.parse_duration_ms(value, name, positive=True)


def _duration(value, name: str) -> int:
    return values.parse_duration_ms(value, name, positive=False)


def _processes(value, name: str) -> int:
    return values.parse_count(value, name, low=1, high=U32_MAX)


def _overflow(value, name: str) -> str:
    return values.parse_choice(value, OVERFLOW_POLICIES, name)


def _keep(value, name: str) -> str:
    return values.parse_choice(value, KEEP_MODES, name)


def _label(value, name: str) -> tuple[str, str]:
    """``KEY=VALUE``, or a typed caller's (key, value) pair (a mapping's item)."""
    if isinstance(value, tuple):
        return values.check_label(value[0], value[1], name)
    return values.parse_label(value, name)


def _assignment(value, name: str) -> tuple[str, str]:
    """``KEY=VALUE``, or a typed caller's (key, value) pair (a mapping's item)."""
    if isinstance(value, tuple):
        return values.parse_env_key(value[0], name), value[1]
    return values.parse_env_assignment(value, name)


OVERFLOW_POLICIES = ("truncate", "cancel")

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
# (option, the option it needs): meaningless without it.
REQUIRES = (
    ("capture_max_bytes", "capture_dir"),
    ("capture_overflow", "capture_dir"),
    ("capture_keep", "capture_dir"),
    ("pty_size", "pty"),
)


# Every run flag, in --help order: the direct parser and the argparse parser both read it.
RUN_OPTIONS = (
    Option(
        "--run-id",
        VALUE,
        metavar="ID",
        help="the id clients find the run by (default: run-<pid>-<nanos>)",
        read=values.parse_run_id,
    ),
    Option(
        "--label",
        REPEAT,
        metavar="K=V",
        help="a label clients can select the run by; repeatable (default: none)",
        keyword="labels",
        read=_label,
    ),
    Option("--cwd", VALUE, metavar="DIR", help="the child's working directory (default: the runner's)"),
    Option("--jsonl", VALUE, metavar="FILE", help="where the lifecycle events go, one JSON line each (required)"),
    Option(
        "--timeout",
        VALUE,
        metavar="DUR",
        help="end the run (106) after this long (default: no limit)",
        read=_positive_duration,
    ),
    Option(
        "--idle-timeout",
        VALUE,
        metavar="DUR",
        help="end the run (106) when the child writes no output for this long (default: no limit)",
        read=_positive_duration,
    ),
    Option(
        "--grace",
        VALUE,
        metavar="DUR",
        help="how long a stopped tree gets between SIGTERM and the kill (default: none, killed at once)",
        read=_duration,
    ),
    Option(
        "--snapshot-interval",
        VALUE,
        metavar="DUR",
        help="also write a members_snapshot event this often (default: only the one at spawn)",
        read=_positive_duration,
    ),
    Option(
        "--max-memory",
        VALUE,
        metavar="SIZE",
        help="cap the whole tree's memory (default: no cap)",
        read=values.parse_size,
    ),
    Option(
        "--max-processes",
        VALUE,
        metavar="N",
        help="cap the number of processes in the tree (default: no cap)",
        read=_processes,
    ),
    Option(
        "--cpu-quota",
        VALUE,
        metavar="CORES",
        help="cap the tree's CPU time, in cores (default: no cap)",
        read=values.parse_cpu_quota,
    ),
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
        read=values.parse_size,
    ),
    Option(
        "--capture-overflow",
        VALUE,
        choices=OVERFLOW_POLICIES,
        help="past the cap, keep running (truncate, the default) or end the run (cancel, 113)",
        read=_overflow,
    ),
    Option(
        "--capture-keep",
        VALUE,
        choices=KEEP_MODES,
        help="which part of each stream its file keeps: head (default), tail, or head-tail (half the cap each)",
        read=_keep,
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
        read=values.parse_pty_size,
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
    Option(
        "--env-remove",
        REPEAT,
        metavar="K",
        help="remove K from the child's environment; repeatable",
        read=values.parse_env_key,
    ),
    Option(
        "--env-file", REPEAT, metavar="FILE", help="add the K=V lines of FILE to the child's environment; repeatable"
    ),
    Option(
        "--env",
        REPEAT,
        metavar="K=V",
        help="set K in the child's environment; repeatable",
        read=_assignment,
    ),
    Option(
        "--run-id-env",
        VALUE,
        metavar="K",
        help="also give the child its run id as K (default: not given)",
        read=values.parse_env_key,
    ),
    Option("--create-no-window", SWITCH, help="Windows only; accepted and ignored elsewhere"),
    Option("--windows-graceful-ctrl-break", SWITCH, help="Windows only; accepted and ignored elsewhere"),
    Option(
        "--usage-file",
        VALUE,
        metavar="FILE",
        help="extension: write the run's whole accounting (every figure, and its counter) to FILE as JSON",
    ),
)


BY_DEST = {option.dest: option for option in RUN_OPTIONS}
