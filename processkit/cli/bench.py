"""``bench``: benchmark one or several commands, hyperfine's vocabulary, every run contained
and measured by the kernel for the whole tree (processkit/benchmark/).

Exit codes: 0 once every command has statistics; 118 (``bench_failed``) when a run fails
without ``--ignore-failure``, a command cannot start, a setup/prepare/cleanup command fails, or
every run of a command timed out; 107 when stopped by a signal; 100 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import signal

from ..errors import Failure, Kind, usage
from ..text import sanitize, unencodable
from . import bench_baseline, values
from .parsing import Once, OnceFlag, Parser


class _Given(argparse.Action):
    """``--command`` and ``--shell`` into one list, in the order they were given."""

    def __call__(self, parser, namespace, value, option_string=None):
        kind = "shell" if option_string == "--shell" else "argv"
        getattr(namespace, self.dest).append((kind, _argv(value, option_string) if kind == "argv" else value))


def _argv(text: str, flag: str | None) -> tuple[str, ...]:
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or not parsed or not all(isinstance(item, str) for item in parsed):
        raise usage(f"invalid value '{text}' for '{flag}': expected a JSON array of strings, e.g. '[\"true\"]'")
    if any(unencodable(item) is not None for item in parsed):
        raise usage(f"invalid value for '{flag}': an argument holds a lone surrogate, which no argument can carry")
    return tuple(parsed)


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli bench",
        usage="processkit-cli bench [OPTIONS] -- PROGRAM [ARGS]... | --command JSON_ARRAY... | --shell STRING...",
        description="Benchmark commands: each run contained, timed from exec to reap, with the whole tree's "
        "CPU and peak memory; interleaved by default.",
    )
    add = parser.add_argument
    add("--command", dest="given", action=_Given, default=[], metavar="JSON_ARRAY", help="a command, shell-free")
    add("--shell", dest="given", action=_Given, default=[], metavar="STRING", help="a command run through sh -c")
    add("-n", "--command-name", action="append", default=[], metavar="NAME", help="name the commands, in order")
    add("-r", "--runs", action=Once, type=int, metavar="N", help="exactly N timed runs per command")
    add("-m", "--min-runs", action=Once, type=int, default=10, metavar="N", help="at least N timed runs (default 10)")
    add("-M", "--max-runs", action=Once, type=int, metavar="N", help="at most N timed runs")
    add("-w", "--warmup", action=Once, type=int, default=0, metavar="N", help="N untimed runs per command first")
    add("--min-time", action=Once, default="3s", metavar="DUR", help="time each command at least this long (3s)")
    add("--prepare", action=Once, metavar="JSON_ARRAY", help="run before every run (warm-up and timed), untimed")
    add("--setup", action=Once, metavar="JSON_ARRAY", help="run once per command before its runs")
    add("--cleanup", action=Once, metavar="JSON_ARRAY", help="run once per command after its runs")
    add("-i", "--ignore-failure", action=OnceFlag, help="keep benchmarking commands that exit non-zero")
    add("--timeout", action=Once, metavar="DUR", help="end a run (and its tree) after DUR; left out of the statistics")
    add(
        "--order",
        action=Once,
        choices=("interleaved", "sequential"),
        default="interleaved",
        help="interleaved (A B A B, the default) or sequential (all of A, then B)",
    )
    add("--metric", action=Once, choices=("wall", "cpu"), default="wall", help="compare by wall or CPU time")
    add("--cpus", action=Once, metavar="LIST", help="pin every run to these CPUs (e.g. 0,2-3)")
    add("--jsonl-dir", action=Once, metavar="DIR", help="keep each run's JSONL lifecycle stream here")
    add("--show-output", action=OnceFlag, help="let the commands' output through (discarded by default)")
    add("--export-json", action=Once, metavar="FILE", help="write the results as JSON (hyperfine's shape)")
    add("--export-markdown", action=Once, metavar="FILE", help="write a Markdown table")
    add("--export-csv", action=Once, metavar="FILE", help="write a CSV table")
    add(
        "--parameter-scan",
        nargs=3,
        action="append",
        default=[],
        metavar=("NAME", "MIN", "MAX"),
        help="{NAME} takes each integer MIN..MAX",
    )
    add(
        "--parameter-list",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUES"),
        help="{NAME} takes each of a,b,c",
    )
    bench_baseline.add_flags(add)  # --baseline, --fail-if-slower
    add("program", nargs="*", metavar="PROGRAM [ARGS]", help="one command, after '--'")
    return parser


MAX_CPU = 8191  # the kernel's largest NR_CPUS: a larger number names no CPU, and bounds a range


def parse_cpus(text: str) -> tuple[int, ...]:
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not values.is_digits(low) or (high and not values.is_digits(high)) or len(part) > 20:
            raise usage(f"invalid value '{text}' for '--cpus': expected a CPU list such as 0,2-3")
        first, last = int(low), int(high or low)
        if first > last or last > MAX_CPU:
            raise usage(f"invalid value '{text}' for '--cpus': a range goes up, and CPUs are numbered 0 to {MAX_CPU}")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def options_from(args: argparse.Namespace):
    from ..benchmark.plan import ORDERS, Options

    return Options(
        runs=args.runs,
        min_runs=args.min_runs,
        max_runs=args.max_runs,
        warmup=args.warmup,
        min_time_s=values.parse_duration_ms(args.min_time, positive=False, flag="--min-time") / 1000,
        prepare=_argv(args.prepare, "--prepare") if args.prepare is not None else None,
        setup=_argv(args.setup, "--setup") if args.setup is not None else None,
        cleanup=_argv(args.cleanup, "--cleanup") if args.cleanup is not None else None,
        ignore_failure=args.ignore_failure,
        timeout_ms=values.parse_duration_ms(args.timeout, positive=True, flag="--timeout") if args.timeout else None,
        order=ORDERS[args.order],
        cpus=parse_cpus(args.cpus) if args.cpus is not None else None,
        jsonl_dir=args.jsonl_dir,
        show_output=args.show_output,
        metric=args.metric,
    )


def main(argv: list[str], invocation) -> int:
    if "--" in argv:
        split = argv.index("--")
        args = build_parser().parse(argv[:split])
        if args.program:
            raise usage(f"unexpected argument '{args.program[0]}' before '--'")
        args.program = argv[split + 1 :]
    else:
        args = build_parser().parse(argv)
    from ..benchmark import bench_commands, exports
    from ..benchmark.plan import expand, scan_values

    given = list(args.given)
    if args.program:
        if given:
            raise usage("give the command after '--' or with --command/--shell, not both")
        given = [("argv", tuple(args.program))]
    parameters = [(name, scan_values(low, high)) for name, low, high in args.parameter_scan]
    parameters += [(name, listed.split(",")) for name, listed in args.parameter_list]
    commands = expand(given, args.command_name, parameters)
    options = options_from(args)
    earlier = bench_baseline.read(args)  # checked before the first run
    if options.jsonl_dir is not None:
        try:
            os.makedirs(options.jsonl_dir, exist_ok=True)
        except OSError as exc:
            raise Failure(
                Kind.SETUP, f"cannot make --jsonl-dir {sanitize(options.jsonl_dir)}: {exc.strerror}"
            ) from None
    for signum in (signal.SIGTERM, signal.SIGHUP):  # between runs too, stop through the cleanup
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _interrupt)
    try:
        drawn = os.isatty(1) and not options.show_output  # the commands' own output would tear the lines
        result = bench_commands(commands, options, progress_fd=1 if drawn else None)
    except KeyboardInterrupt:  # a stop signal between two runs (during one, the run reports it)
        raise Failure(Kind.CANCELLED, "benchmark stopped by a signal") from None
    from ..benchmark import summary
    from . import output

    if earlier is not None:
        bench_baseline.attach(result, earlier, args.baseline)
    output.lines(summary.render(result).splitlines() + bench_baseline.lines(result))
    for flag, kind in (("export_json", "json"), ("export_markdown", "markdown"), ("export_csv", "csv")):
        path = getattr(args, flag)
        if path is not None:
            _write(path, exports.WRITERS[kind](result))
    unfinished = [r.command.name for r in result.results if r.summary is None]
    if unfinished:
        raise Failure(Kind.BENCH_FAILED, f"every run of {sanitize(unfinished[0])!r} timed out")
    bench_baseline.gate(result, args.fail_if_slower)
    return 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot write {sanitize(path)}: {exc.strerror}") from None
