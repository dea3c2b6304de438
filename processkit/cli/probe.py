"""``probe --json``: the fail-closed preflight a launcher runs on a candidate binary before it
starts anything through it (docs/control-plane.md §4, probe.schema.json).

It reads constants and prints; it spawns nothing and opens no registry, socket or container,
so running it has no side effects. Any unmet ``--require-*`` expectation is exit 110, with the
report still printed so the caller always has a parseable answer.
"""

from __future__ import annotations

import socket
from importlib import resources

from ..version import __version__
from ..errors import RESERVED_BAND, Failure, Kind, usage
from ..events.types import SCHEMA_VERSION
from ..events.validate import EVENT_SCHEMA_FILE
from ..spec import U32_MAX
from ..text import cut
from . import output
from ..grammar.values import bounded_int, is_count
from .parsing import Once, OnceFlag, Parser

PROBE_VERSION = 1
GLOBAL_FLAGS = ("--error-format",)


def capabilities() -> list[str]:
    """What the parser cannot know: ``run`` always ends with resource_summary, ``attest``
    can decide only where the kernel names a socket's peer, ``wait`` remembers ended runs'
    outcomes, ``run`` refuses paths another user controls, and with ``--capture-keep tail`` or
    ``head-tail`` it records which stream ranges each capture file holds in
    ``capture-keep.json`` beside them (``capture-keep:layout``)."""
    found = ["run:resource-summary", "capture-keep:layout"]
    found.append("bench:hyperfine-json")  # bench's --export-json reads as hyperfine's export
    found.append("bench:hyperfine-commands")  # bench's COMMANDs are shell commands, -S the shell
    found.append("bench:shell-startup-subtracted")  # the shell's start-up is measured and taken off
    found.append("bench:baseline-gate")  # bench --baseline compares with an earlier export; --fail-if-slower is 119
    found.append("bench:load-aware-gate")  # the gate decides on instructions or CPU time on a busy host (issue 47)
    # runs --timeout ended fail the gate, and are said beside the comparison's verdict (timed_out)
    found.append("bench:timeout-aware-gate")
    found.append("bench:throttle-aware-gate")  # a CPU quota that held the runs back counts as a busy host, and is said
    # the load's stretch of a command's CPU time passes a wall-time slowdown only for a CPU-bound command
    found.append("bench:wait-aware-gate")
    found.append("bench:off-cpu-gate")  # off_cpu_times per run; a longer wait on one CPU regresses beside CPU load
    found.append("bench:counters")  # perf counters per run in the export (null where the host lacks one)
    found.append(
        "bench:tree-peak-memory"
    )  # memory_usage_byte is ru_maxrss (hyperfine's); tree_peak_memory_byte the group's
    found.append("bench:hyperfine-cpu")  # user and system are the root's rusage (hyperfine's); cpu_times the tree's
    if hasattr(socket, "SO_PEERCRED"):
        found.append("attest:peer-identity")
    found.append("wait:ended-outcome")  # a run that ended before the wait began is still reported
    found.append("kill:ends-grace")  # a control kill during a graceful stop's grace ends the grace at once
    # run --detach hands the copy the caller's descriptor a --stdin-file or --env-file names (/dev/stdin)
    found.append("detach:input-fds")
    found.append("paths:private")  # another user's links and directories are refused (safepath)
    # a run whose --jsonl another run writes goes on without a stream (its events written nowhere), not 111
    found.append("jsonl:held-runs-without")
    found.append("registry:jsonl-held")  # such a run's record says so ("jsonl_held": true): no stream of its own
    found.append("registry:batch-delegation")  # a batch's record delegates to its jobs' (control/lodging.py)
    found.append("capture-keep:live")  # a ring run's live record and marks: a killed runner's ring is read in order
    # batch as parallel, make and nextest users work (docs/batch.md): what no flag shows
    found.append("batch:command-templates")  # -- CMD ::: A B, :::: FILE, stdin lines; {} {.} {/} {//} {/.} {#} {%} {n}
    found.append("batch:sources-from-last")  # {-1} {-2.} ...: the sources counted from the last, as parallel's
    found.append("batch:relative-jobs")  # --jobs +N, -N, P% of the CPUs and 0, as GNU parallel reads them
    found.append("batch:job-graph")  # a manifest's needs; skipped below a failure; cycles refused
    found.append("batch:slots-groups")  # a manifest's slots and group keys (--group-limit)
    found.append("batch:flaky-jobs")  # "flaky": true in the summary line of a job that passed on a retry
    found.append("batch:oom-kills")  # "oom_kills": N in the summary line of a job the OOM killer hit, and said
    found.append("batch:pids-cap-refused")  # "pids_cap_refused": N in the line of a job whose pids cap refused a fork
    found.append("batch:slow-lines")  # "batch: SLOW [> 60.000s] ID" each --slow-after period a job runs on
    found.append("batch:leaks")  # "leaked": N in the summary line of a job whose processes outlived its command
    found.append("batch:leaks-unknown")  # "leaked_unknown": true where its members could not be counted then
    found.append("batch:attempt-signals")  # "signal": N in an earlier attempt a signal ended, said as the job's
    found.append("batch:content-resume")  # a manifest's inputs: --resume compares their SHA-256
    return found


def flags() -> dict[str, tuple[str, ...]]:
    """Every subcommand's long flags (--help aside), read from the parser it really uses."""
    from .parsers import all_parsers

    found = {}
    for command, parser in all_parsers().items():
        options = (option for action in parser._actions for option in action.option_strings)
        found[command] = tuple(sorted(option for option in options if option.startswith("--") and option != "--help"))
    return found


def surface() -> list[str]:
    tokens = set(capabilities())
    for command, command_flags in flags().items():
        tokens.add(command)
        tokens.update(f"{command}:{flag}" for flag in command_flags + GLOBAL_FLAGS)
    return sorted(tokens)


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli probe",
        usage="processkit-cli probe --json [--require-schema-version <N>] [--require-exit-code-band <START-END>] "
        "[--require-surface <TOKEN>]... [--print-schema]",
        description="Report (and check) this binary's compatibility surface, with no side effects.",
    )
    parser.add_argument("--json", action=OnceFlag, help="required: the report is one JSON line")
    parser.add_argument(
        "--require-schema-version", action=Once, metavar="N", help="110 unless the event schema version is N"
    )
    parser.add_argument(
        "--require-exit-code-band",
        action=Once,
        metavar="START-END",
        help="110 unless the runner's own exit codes are exactly START-END",
    )
    parser.add_argument(
        "--require-surface",
        action="append",
        default=[],
        metavar="TOKEN",
        help="110 unless the surface lists TOKEN (a subcommand, or one of its flags); repeatable",
    )
    parser.add_argument("--print-schema", action=OnceFlag, help="print the shipped event schema instead")
    return parser


PARSERS = {"probe": build_parser}  # command -> its parser (probe reads its flags from it)


def _unsigned(text: str, limit: int) -> int | None:
    """Rust's unsigned parse, as the reference's flags read a number: a "+" and leading zeros
    allowed (``+100``, ``0100``), nothing else; None past ``limit``."""
    return bounded_int(text.removeprefix("+"), limit) if is_count(text) else None


def _band(text: str) -> tuple[int, int]:
    start, _, end = text.partition("-")  # split at the first "-", as the reference does
    low, high = _unsigned(start, 255), _unsigned(end, 255)
    if low is None or high is None or low > high:
        raise usage(f"invalid value '{cut(text)}' for '--require-exit-code-band <START-END>': expected e.g. 100-119")
    return low, high


def _schema_version(text: str) -> int:
    value = _unsigned(text, U32_MAX)
    if value is None:
        raise usage(f"invalid value '{cut(text)}' for '--require-schema-version <N>': expected an unsigned integer")
    return value


def main(argv: list[str], invocation) -> int:
    args = build_parser().parse(argv)
    if not args.json:
        raise usage("the required argument '--json' was not provided")
    requires = [args.require_schema_version, args.require_exit_code_band, args.require_surface]
    if args.print_schema:
        if any(requires):
            raise usage("the argument '--print-schema' cannot be used with any '--require-*' argument")
        output.raw(resources.files("processkit.events").joinpath(EVENT_SCHEMA_FILE).read_bytes())
        return 0
    mismatches = []
    if args.require_schema_version is not None:
        wanted = _schema_version(args.require_schema_version)
        if wanted != SCHEMA_VERSION:
            mismatches.append(f"requires JSONL schema_version {wanted}, but this binary emits {SCHEMA_VERSION}")
    band = (RESERVED_BAND.start, RESERVED_BAND.stop - 1)
    if args.require_exit_code_band is not None:
        wanted_band = _band(args.require_exit_code_band)
        if wanted_band != band:
            mismatches.append(
                f"requires exit-code band {wanted_band[0]}-{wanted_band[1]}, but this binary reserves {band[0]}-{band[1]}"
            )
    tokens = surface()
    mismatches += [
        f"requires CLI surface token `{token}`, which this binary does not expose"
        for token in args.require_surface
        if token not in tokens
    ]
    output.json_line(
        {
            "binary": "processkit-cli",
            "version": __version__,
            "probe_version": PROBE_VERSION,
            "schema_version": SCHEMA_VERSION,
            "exit_code_band": {"start": band[0], "end": band[1]},
            "surface": tokens,
            "compatible": not mismatches,
            "mismatches": mismatches,
        }
    )
    if mismatches:
        raise Failure(
            Kind.PROBE_INCOMPATIBLE,
            "this binary is incompatible with the requested launch surface: " + "; ".join(mismatches),
        )
    return 0
