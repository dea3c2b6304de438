"""``run``'s grammar: every flag in ``--help`` order with the grammar of its values, what each
conflicts with or requires, and the one construction of a ``RunSpec`` (``build``) from the
options a describer was given.

Every describer of a run (the ``run`` command line, the API's keywords, a manifest line) hands
``build`` the options it was given, by ``dest``: the text or typed value of each option given,
a list for a repeatable one, True for a switch; an option not given is absent. ``build`` checks
which options were given against each other (what conflicts, what needs what), reads each value
through its grammar (``Option.read``), checks the run id variable against ``env`` and assembles
the frozen spec. Each failure is a usage ``Failure`` naming the options as the describer's
``Naming`` does.
"""

from __future__ import annotations

from ..errors import usage
from ..spec import (
    DEFAULT_CAPTURE_MAX_BYTES,
    KEEP_MODES,
    U32_MAX,
    EnvPlan,
    Limits,
    OverflowPolicy,
    RunSpec,
    StdinMode,
    new_run_id,
)
from . import REPEAT, SWITCH, VALUE, Option, path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any

    from . import Naming


# Each option's value grammar, from ``values``: imported by the first value read (a plain run
# reads none), as the run path's rule has it (docs/architecture.md).
def _values():
    if not _LOADED:  # once: an import statement per value read cost a large env's every item 3 µs
        from . import values

        _LOADED.append(values)
    return _LOADED[0]


_LOADED: list = []


def _run_id(value, name: str) -> str:
    return _values().parse_run_id(value, name)


def _positive_duration(value, name: str) -> int:
    return _values().parse_duration_ms(value, name, positive=True)


def _duration(value, name: str) -> int:
    return _values().parse_duration_ms(value, name, positive=False)


def _size(value, name: str) -> int:
    return _values().parse_size(value, name)


def _processes(value, name: str) -> int:
    return _values().parse_count(value, name, low=1, high=U32_MAX)


def _cores(value, name: str) -> float:
    return _values().parse_cpu_quota(value, name)


def _overflow(value, name: str) -> str:
    return _values().parse_choice(value, OVERFLOW_POLICIES, name)


def _keep(value, name: str) -> str:
    return _values().parse_choice(value, KEEP_MODES, name)


def _pty_size(value, name: str) -> tuple[int, int]:
    return _values().parse_pty_size(value, name)


def _env_key(value, name: str) -> str:
    return _values().parse_bare_env_key(value, name)


def _label(value, name: str) -> tuple[str, str]:
    """``KEY=VALUE``, or a typed caller's (key, value) pair (a mapping's item)."""
    if isinstance(value, tuple):
        return _values().check_label(value[0], value[1], name)
    return _values().parse_label(value, name)


def _assignment(value, name: str) -> tuple[str, str]:
    """``KEY=VALUE``, or a typed caller's (key, value) pair (a mapping's item)."""
    if isinstance(value, tuple):
        return _values().parse_env_key(value[0], name), value[1]
    return _values().parse_env_assignment(value, name)


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
        read=_run_id,
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
        read=_size,
    ),
    Option(
        "--max-processes",
        VALUE,
        metavar="N",
        help="cap the tree's tasks, processes and their threads alike as the pids controller counts them (default: no cap)",
        read=_processes,
    ),
    Option(
        "--cpu-quota",
        VALUE,
        metavar="CORES",
        help="cap the tree's CPU time, in cores (default: no cap)",
        read=_cores,
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
        read=_size,
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
        read=_pty_size,
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
        read=_env_key,
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
        read=_env_key,
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


def check_given(given: Collection[str], name: Naming) -> None:
    """Which options were given, checked against each other: the declared conflicts first, then
    what an option needs, then the stream every run writes (``--jsonl``), all before any value
    is read (so every describer reports the same first error). The CLI calls it before it reads
    a command from stdin, ``build`` again on whatever it is given."""
    for dest, others in CONFLICTS:
        if dest in given:
            for other in others:
                if other in given:
                    raise usage(f"the argument '{name(BY_DEST[dest])}' cannot be used with '{name(BY_DEST[other])}'")
    for dest, needed in REQUIRES:
        if dest in given and needed not in given:
            raise usage(f"the argument '{name(BY_DEST[dest])}' requires '{name(BY_DEST[needed])}'")
    if "jsonl" not in given:
        jsonl = BY_DEST["jsonl"]
        raise usage(f"the required argument '{name.given(jsonl, f'<{jsonl.metavar}>')}' was not provided")


def read(given: dict[str, object], name: Naming) -> dict[str, Any]:
    """Each given option's value through its grammar, in the order given (the first bad one is
    the first the caller wrote, as clap reports it); a dest no run option has is a KeyError, a
    describer's own bug."""
    typed: dict[str, Any] = {}
    value: Any
    for dest, value in given.items():
        option = BY_DEST[dest]
        grammar = option.read or path
        if option.kind == SWITCH:
            typed[dest] = value
        elif option.kind == REPEAT:
            shown = name(option)
            typed[dest] = [grammar(item, shown) for item in value]
        else:
            typed[dest] = grammar(value, name(option))
    return typed


def build(argv: tuple[str, ...], given: dict[str, object], name: Naming) -> RunSpec:
    """The RunSpec of ``argv`` under the ``given`` options (see the module's docstring)."""
    check_given(given, name)
    typed = read(given, name)
    assignments = tuple(typed.get("env", ()))
    run_id_key = typed.get("run_id_env")
    if run_id_key is not None and any(key == run_id_key for key, _ in assignments):
        rid, env = BY_DEST["run_id_env"], BY_DEST["env"]
        raise usage(
            f"'{name.given(rid, run_id_key)}' conflicts with '{name.given(env, f'{run_id_key}=...')}': "
            "the run id variable is set by the runner"
        )
    inherit_stdio = "inherit_stdio" in typed
    stdin = StdinMode.NULL
    if inherit_stdio or "inherit_stdin" in typed:
        stdin = StdinMode.INHERIT
    elif "stdin_file" in typed:
        stdin = StdinMode.FILE
    run_id = typed.get("run_id")
    return RunSpec(
        argv=argv,
        jsonl=typed["jsonl"],
        run_id=new_run_id() if run_id is None else run_id,
        run_id_given=run_id is not None,
        labels=tuple(sorted(dict(typed.get("label", ())).items())),  # the last of a key wins
        cwd=typed.get("cwd"),
        timeout_ms=typed.get("timeout"),
        idle_timeout_ms=typed.get("idle_timeout"),
        grace_ms=typed.get("grace"),
        snapshot_interval_ms=typed.get("snapshot_interval"),
        env=EnvPlan(
            clear="env_clear" in typed,
            remove=tuple(typed.get("env_remove", ())),
            files=tuple(typed.get("env_file", ())),
            assignments=assignments,
            run_id_key=run_id_key,
        ),
        limits=Limits(
            max_memory=typed.get("max_memory"),
            max_processes=typed.get("max_processes"),
            cpu_quota=typed.get("cpu_quota"),
        ),
        capture_dir=typed.get("capture_dir"),
        capture_max_bytes=typed.get("capture_max_bytes", DEFAULT_CAPTURE_MAX_BYTES),
        capture_overflow=OverflowPolicy.CANCEL
        if typed.get("capture_overflow") == "cancel"
        else OverflowPolicy.TRUNCATE,
        capture_keep=typed.get("capture_keep", "head"),
        stdin=stdin,
        stdin_file=typed.get("stdin_file"),
        inherit_stdio=inherit_stdio,
        pty="pty" in typed,
        pty_size=typed.get("pty_size"),
        echo="no_echo" not in typed,
        argv_raw="argv_raw" in typed,
        detach="detach" in typed,
        usage_file=typed.get("usage_file"),
    )
