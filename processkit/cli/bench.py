"""``bench``: benchmark one or several commands, hyperfine's vocabulary, every run contained
and measured by the kernel for the whole tree (processkit/benchmark/).

Exit codes: 0 once every command has statistics; 118 (``bench_failed``) when a run fails
without ``--ignore-failure``, a command cannot start, a setup/prepare/cleanup command fails,
every run of a command timed out, or fewer runs finished within ``--timeout`` than it needs;
119 (``bench_regressed``) when ``--fail-if-slower`` finds a significant slowdown against
``--baseline``; 107 when stopped by SIGTERM or SIGHUP; by Ctrl-C (SIGINT) it dies by SIGINT once
everything is released, as hyperfine and ``batch`` do (a shell loop around it stops); 100 for
usage errors.
"""

from __future__ import annotations

import argparse
import os

from ..errors import Failure, usage
from ..text import unencodable
from ..benchmark.plan import DEFAULT_SHELL, SORTS, TIME_UNITS
from ..benchmark import options as measured_options
from ..grammar import FLAGS, REPEAT, Naming
from ..benchmark import argvs
from . import bench_baseline
from .bench_exports import Exports, apart
from .parsing import Once, OnceFlag, OncePath, Parser

STYLES = ("auto", "basic", "full", "nocolor", "color", "none")


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli bench",
        usage="processkit-cli bench [OPTIONS] COMMAND... | --command JSON_ARRAY... | -- PROGRAM [ARGS]...",
        description="Benchmark commands as hyperfine does (each COMMAND a shell command), each run contained, "
        "timed from spawn to reap, with the whole tree's CPU and peak memory; interleaved by default.",
    )
    add = parser.add_argument
    add(
        "commands", nargs="*", metavar="COMMAND", help="a command run through the shell (-S), or split without one (-N)"
    )
    add("--command", action="append", default=[], metavar="JSON_ARRAY", help="a command, shell-free (an argv)")
    add("-S", "--shell", action=Once, metavar="SHELL", help="the shell commands run through (default sh; 'none': -N)")
    add("-N", dest="no_shell", action=OnceFlag, help="run commands without a shell, split as a shell would")
    add("-n", "--command-name", action="append", default=[], metavar="NAME", help="name the commands, in order")
    add("--reference", action=Once, metavar="CMD", help="compare every command with this one (run first)")
    add("--reference-name", action=Once, metavar="NAME", help="the reference's name")
    measured(add, "-r", "--runs")
    measured(add, "-m", "--min-runs")  # no default here: --runs conflicts with it given (10: options.read)
    measured(add, "-M", "--max-runs")
    measured(add, "-w", "--warmup", default=0)
    measured(add, "--min-time", default="3s")
    add(
        "-p",
        "--prepare",
        action="append",
        default=[],
        metavar="CMD",
        help="before every run, untimed (once, or once per command)",
    )
    add(
        "-C",
        "--conclude",
        action="append",
        default=[],
        metavar="CMD",
        help="after every run, untimed (once, or once per command)",
    )
    add("-s", "--setup", action=Once, metavar="CMD", help="once per command before its runs")
    add("-c", "--cleanup", action=Once, metavar="CMD", help="once per command after its runs")
    measured(add, "-i", "--ignore-failure", nargs="?", const="all-non-zero", default=False)
    measured(add, "--timeout")
    measured(add, "--order", default="interleaved")
    measured(add, "--metric", default="wall")
    add(
        "--sort",
        action=Once,
        choices=SORTS,
        default="auto",
        help="the comparison's and tables' order: auto, command, mean-time",
    )
    add("-u", "--time-unit", action=Once, choices=TIME_UNITS, metavar="UNIT", help="millisecond, second or microsecond")
    add(
        "--style",
        action=Once,
        choices=STYLES,
        default="auto",
        help="auto, basic, full, nocolor, color or none (no colours are drawn: color prints as basic)",
    )
    measured(add, "--cpus")
    add("--jsonl-dir", action=OncePath, metavar="DIR", help="keep each run's JSONL lifecycle stream here")
    add("--show-output", action=OnceFlag, help="let the commands' output through (discarded by default)")
    measured(add, "--output", default=[])
    measured(add, "--input")
    add(
        "--export-json",
        action=OncePath,
        metavar="FILE",
        help="write the results as JSON (hyperfine's shape; user and system, as on the terminal, are hyperfine's: "
        "the root's and what it waited for; the whole tree's CPU, a process the command left running in it, is cpu)",
    )
    add("--export-markdown", action=OncePath, metavar="FILE", help="write a Markdown table ('-': stdout)")
    add("--export-csv", action=OncePath, metavar="FILE", help="write a CSV table")
    add("--export-asciidoc", action=OncePath, metavar="FILE", help="write an AsciiDoc table")
    add("--export-orgmode", action=OncePath, metavar="FILE", help="write an Emacs org-mode table")
    add(
        "-P",
        "--parameter-scan",
        nargs=3,
        action="append",
        default=[],
        metavar=("NAME", "MIN", "MAX"),
        help="{NAME} takes each number MIN..MAX (integers, or -D's steps)",
    )
    add("-D", "--parameter-step-size", action=Once, metavar="DELTA", help="the --parameter-scan's step")
    add(
        "-L",
        "--parameter-list",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUES"),
        help="{NAME} takes each of a,b,c",
    )
    bench_baseline.add_flags(add)  # --baseline, --fail-if-slower
    return parser


def measured(add, *flags: str, **extra: object) -> None:
    """One of the measured options (``benchmark.options``' table, which the API reads too): its
    value left as the text its grammar reads, in ``options_from``."""
    option = measured_options.BY_FLAG[flags[-1]]
    action = "append" if option.kind == REPEAT else Once
    add(*flags, action=action, metavar=option.metavar, choices=option.choices, help=option.help, **extra)


def shell_from(args: argparse.Namespace) -> tuple[str, ...] | None:
    """hyperfine's ``-S``: a shell's name or command line, ``default`` (sh) or ``none`` (-N)."""
    if args.no_shell:
        if args.shell is not None:
            raise usage("-N and --shell cannot be used together")
        return None
    return DEFAULT_SHELL if args.shell is None else measured_options.shell_of(args.shell, "--shell")


def options_from(args: argparse.Namespace, shell: tuple[str, ...] | None, typed: dict, named: Naming):
    """The session's options: ``typed``, the measured options as ``benchmark.options`` read them."""
    args.fail_if_slower = typed.get("fail_if_slower")  # the gate's, after the runs (bench_baseline.gate)
    return measured_options.session_options(
        typed,
        shell=shell,
        reference=args.reference is not None,
        jsonl_dir=args.jsonl_dir,
        show_output=args.show_output,
        named=named,
    )


# hyperfine's hidden flags a hyperfine user may type: one line that points the way, instead of
# argparse's "unrecognized arguments" and the usage.
HYPERFINE_ONLY = {
    "--min-benchmarking-time": "hyperfine's; here it is --min-time DUR (a bare number is seconds: --min-time 3)",
    "--debug-mode": "hyperfine's mock of its runs; bench has none: every figure it prints is measured",
}


def parse(argv: list[str]) -> argparse.Namespace:
    """Options and shell commands in any order (hyperfine's habit), then ``-- PROGRAM ARGS``."""
    program: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, program = argv[:split], argv[split + 1 :]
    marked = _in_place(argv)
    for word in marked:  # a marked word is a -L/-P/--command value, never a flag (as clap reads it)
        flag = word.partition("=")[0]
        if flag in HYPERFINE_ONLY:
            raise usage(f"{flag} is {HYPERFINE_ONLY[flag]}")
    parser = build_parser()
    try:
        args = parser.parse_intermixed_args(marked)
    except argparse.ArgumentError as exc:
        parser.error(str(exc))
    args.program = program
    return args


ARRAY_MARK = "\0"  # no argument can hold a NUL, so no COMMAND is mistaken for a --command's place


HYPHEN_VALUES = {"-P": 3, "--parameter-scan": 3, "-L": 2, "--parameter-list": 2}


def _in_place(argv: list[str]) -> list[str]:
    """Each ``--command JSON`` as a marked COMMAND, so the two kinds keep the order they were
    given in (argparse reads options before the COMMANDs around them); ``-P``/``-L`` values
    marked too, so ``-P n -5 5`` and ``-L x -a,-b`` read as hyperfine reads them."""
    marked, index = [], 0
    while index < len(argv):
        token = argv[index]
        if token in ("-i", "--ignore-failure"):  # its value only ever follows '=', as hyperfine's
            token = "--ignore-failure=all-non-zero"
        count = HYPHEN_VALUES.get(token, 0)
        if count and index + count < len(argv):
            marked += [token, *(ARRAY_MARK + value for value in argv[index + 1 : index + 1 + count])]
            index += 1 + count
            continue
        if token == "--command" and index + 1 < len(argv):
            marked.append(ARRAY_MARK + argv[index + 1])
            index += 2
            continue
        marked.append(ARRAY_MARK + token.removeprefix("--command=") if token.startswith("--command=") else token)
        index += 1
    return marked


def plan_from(args: argparse.Namespace, named: Naming = FLAGS):
    """The commands and options these arguments ask for; ``named``: how their failures name an
    option (the flags: ``processkit.bench`` reads its keywords by the same table, without a
    command line, ``api.bench``)."""
    from ..benchmark.plan import Auxiliary, expand, parameter_list, scan_values

    shell = shell_from(args)
    given = [
        ("argv", argvs.argv_value(text[1:], "--command")) if text.startswith(ARRAY_MARK) else ("shell", text)
        for text in args.commands
    ]
    if args.program:
        if given:
            raise usage("give the command after '--' or as COMMAND/--command, not both")
        given = [("argv", tuple(args.program))]
    if any(unencodable(text) is not None for text in args.commands):
        raise usage("a command holds a lone surrogate, which no argument can carry")
    if args.parameter_step_size is not None and not args.parameter_scan:
        raise usage("the argument '--parameter-step-size' requires '--parameter-scan'")
    present = [dest for dest in measured_options.BY_DEST if getattr(args, dest) not in (None, False, [])]
    measured_options.check_given(present, named)
    typed = measured_options.read({dest: getattr(args, dest) for dest in measured_options.MEASURED}, named)
    step = args.parameter_step_size
    scans = [[value.removeprefix(ARRAY_MARK) for value in scan] for scan in args.parameter_scan]
    lists = [[value.removeprefix(ARRAY_MARK) for value in listed] for listed in args.parameter_list]
    parameters = [(name, scan_values(low, high, step)) for name, low, high in scans]
    parameters += [(name, parameter_list(listed)) for name, listed in lists]
    auxiliary = Auxiliary(
        setup=argvs.step_value(args.setup, "--setup") if args.setup is not None else None,
        cleanup=argvs.step_value(args.cleanup, "--cleanup") if args.cleanup is not None else None,
        prepare=[argvs.step_value(text, "--prepare") for text in args.prepare],
        conclude=[argvs.step_value(text, "--conclude") for text in args.conclude],
        outputs=typed["output"],
    )
    reference = (("shell", args.reference), args.reference_name) if args.reference is not None else None
    commands = expand(given, args.command_name, parameters, shell=shell, reference=reference, auxiliary=auxiliary)
    return commands, options_from(args, shell, typed, named)


def main(argv: list[str], invocation) -> int:
    from ..benchmark import perf_switch

    perf_switch.turn_on()  # the kernel's grace period waited out beside the parsing and the imports
    args = parse(argv)
    from ..benchmark import bench_commands
    from ..mountinfo import refuse_foreign_proc

    commands, options = plan_from(args)
    refuse_foreign_proc()  # after the command line is read: a usage error is still 100
    earlier = bench_baseline.read(args)  # checked before the first run
    measured_options.make_jsonl_dir(options)
    from ..benchmark.result import BenchResult
    from ..benchmark.session import settings
    from ..benchmark.shortfall import shortfall

    exports = Exports(args)
    apart(exports.targets, args.baseline)  # before anything is written: a refused run leaves every file as it was
    exports.finished(BenchResult([], settings(options)))
    from ..benchmark.session import Stopped
    from ..benchmark.printout import Pieces
    from .output import Held

    pieces, shown = Pieces(len(commands), args.time_unit, args.sort), Held()  # the header first, the block once over
    over = None if args.style == "none" else lambda so_far, index: shown.print(pieces.block(so_far, index))
    starts = None if over is None else lambda so_far, index: shown.print(pieces.header(so_far, index))
    try:  # a stop signal between runs too stops through the cleanup (``bench_commands``)
        draws = 1 if _draws(args, commands) else None
        finished = exports.finished if exports.wanted() else None
        result = bench_commands(commands, options, progress_fd=draws, finished=finished, over=over, starts=starts)
    except Failure as stopped:  # a failure or a stop: a stream's export gets what the files hold
        exports.ended_early()
        if not isinstance(stopped, Stopped) or stopped.source != "ctrl_c":
            raise
        from .commands import DIE_BY_SIGINT

        if invocation.error_format != "json":  # an envelope's code is the exit code: none for a death
            invocation.fail(stopped)  # the line saying so; everything is released: end as SIGINT would
        return DIE_BY_SIGINT
    if earlier is not None:  # before the final exports, which carry the verdicts
        bench_baseline.attach(result, earlier, args.baseline, args.fail_if_slower, options)
    if over is not None:
        shown.print(pieces.rest(result) + bench_baseline.lines(result))
    failure = shortfall(result, options) or _regression(result)
    exports.final(result, failure is not None)
    if failure is not None:
        raise failure
    shown.raise_held()  # a failed write of stdout: after the gate's verdict and the final exports
    return 0


def _regression(result):
    """The gate's failure (119) as a value, taken before the exports: a benchmark it fails keeps
    its figures off the baseline they were judged against (a rerun would pass against them)."""
    from ..errors import Failure

    try:
        bench_baseline.gate(result)
    except Failure as regressed:
        return regressed
    return None


def _draws(args: argparse.Namespace, commands) -> bool:
    """hyperfine's ``--style``: progress on a terminal (``auto``, ``nocolor``), always (``full``),
    never (``basic``, ``color``, ``none``); never over the commands' own output. ``TERM=dumb``
    is no reason to draw none: hyperfine's ``auto`` takes it for ``nocolor``, its bar drawn."""
    if args.show_output or any(command.output == "inherit" for command in commands):
        return False
    if args.style == "full":
        return True
    return args.style in ("auto", "nocolor") and os.isatty(1)
