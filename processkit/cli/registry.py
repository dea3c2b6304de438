"""``list``, ``wait`` and ``prune``: the clients that read the registry alone and never talk
to a runner (docs/control-plane.md §2.5-§2.7). An unreadable registry is 111 for all of them."""

from __future__ import annotations

import time

from ..errors import Kind
from ..registry import scan
from ..registry.lock import Health
from ..text import plural
from ..grammar import values
from . import output, targets
from .parsing import Once, OnceFlag, Parser

WAIT_POLL_SECONDS = 0.25
LIST_FIELDS = ("run_id", "health", "started_at", "hint", "argv_sha256", "labels", "jsonl", "capture_dir", "endpoint")
SHA_SHOWN = 12


def main(argv: list[str], invocation) -> int:
    return COMMANDS[invocation.operation](argv, invocation)


# -- list -------------------------------------------------------------------------------------
def list_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli list", usage="processkit-cli list [--json] [--label <K=V>]... [--health <HEALTH>]"
    )
    parser.add_argument("--json", action=OnceFlag, help="JSON Lines, one run per line")
    parser.add_argument(
        "--label", action="append", default=[], metavar="K=V", help="only runs with this label; repeatable"
    )
    parser.add_argument(
        "--health",
        action=Once,
        choices=[h.value for h in Health.members()],
        help="only runs of this health (default: all)",
    )
    return parser


def list_runs(argv: list[str], invocation) -> int:
    args = list_parser().parse(argv)
    wanted = targets.labels(args.label)
    rows = []
    for entry in scan.read(Kind.REGISTRY_SETUP).entries:
        if not entry.record.matches(wanted):
            continue
        health = entry.health().value
        if args.health in (None, health):
            rows.append(_list_entry(entry, health))
    if args.json:
        for row in rows:
            output.json_line(row)
    elif rows:
        output.lines(output.table(tuple(f.upper() for f in LIST_FIELDS), [_list_cells(row) for row in rows]))
    else:
        output.lines(["no runs registered"])
    return 0


def _list_entry(entry: scan.Entry, health: str) -> dict:
    record = entry.record
    return {
        "run_id": record.run_id,
        "health": health,
        "started_at": record.started_at,
        "hint": record.hint,
        "argv_sha256": record.argv_sha256,
        "labels": record.labels,
        "jsonl": record.jsonl,
        "capture_dir": record.capture_dir,
        "endpoint": record.endpoint,
    }


def _list_cells(row: dict) -> list[str]:
    shown = dict(row)
    if row["argv_sha256"] is not None:
        shown["argv_sha256"] = row["argv_sha256"][:SHA_SHOWN] + "..."
    shown["labels"] = ",".join(f"{key}={value}" for key, value in sorted(row["labels"].items())) or None
    return [output.cell(shown[field]) for field in LIST_FIELDS]


# -- wait -------------------------------------------------------------------------------------
def wait_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli wait",
        usage="processkit-cli wait (--run-id <ID> | --all [--label <K=V>]...) [--timeout <DUR>] [--report-outcome]",
    )
    targets.add_arguments(parser)
    parser.add_argument(
        "--timeout", action=Once, metavar="DUR", help="give up (112) after this long (default: no limit)"
    )
    parser.add_argument("--report-outcome", action=OnceFlag, help="print runner_exit's code, source and child_code")
    return parser


def wait(argv: list[str], invocation) -> int:
    args = wait_parser().parse(argv)
    selection = targets.select(args, invocation)
    timeout_ms = None if args.timeout is None else values.parse_duration_ms(args.timeout, "--timeout", positive=True)
    from ..registry.waiting import AllWatch, RunIdWatch

    watch = RunIdWatch(selection.run_id) if selection.run_id is not None else AllWatch(selection.labels)
    deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
    while not watch.done():
        pause = WAIT_POLL_SECONDS
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                bare = not args.timeout[-1].isalpha()  # a bare number is seconds: shown with its unit
                raise watch.timed_out(f"{args.timeout}s" if bare else args.timeout)
            pause = min(pause, remaining)
        time.sleep(pause)
    if args.report_outcome:
        output.json_line(watch.report())
    return 0


# -- prune ------------------------------------------------------------------------------------
def prune_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli prune",
        usage="processkit-cli prune [--json] [--dry-run] [--label <K=V>]... [--report-reaped]",
    )
    parser.add_argument("--json", action=OnceFlag, help="print the tally as one JSON line (default: human text)")
    parser.add_argument("--dry-run", action=OnceFlag, help="report what would be pruned and ended, change nothing")
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="K=V",
        help="repeatable; skips orphaned locks and dead runs no entry names",
    )
    parser.add_argument(
        "--report-reaped", action=OnceFlag, help="extension: add what was ended and removed to --json as 'reaped'"
    )
    return parser


def prune(argv: list[str], invocation) -> int:
    args = prune_parser().parse(argv)
    from .. import rundir_shape
    from ..containment import sweep
    from ..registry.prune import prune as run_prune

    labels = targets.labels(args.label)
    report = run_prune(scan.read(Kind.REGISTRY_SETUP), labels, dry_run=args.dry_run)
    # Beyond the reference: what dead runners left on the host is ended and removed too.
    reaped = sweep.Reaped()
    vouched = [c["socket_dir"] for c in report.candidates if c.get("socket_dir") is not None]
    if labels:
        sweep.sweep((), reaped, vouched=vouched, groups=False, dry_run=args.dry_run)
    else:
        sweep.sweep(sweep.parents(), reaped, run_dirs=rundir_shape.listing(), vouched=vouched, dry_run=args.dry_run)
    if args.json:
        document = report.tally()
        if args.dry_run:
            document["candidates"] = report.candidates
        if args.report_reaped:
            document["reaped"] = reaped.as_json()
        output.json_line(document)
    else:
        output.lines(_prune_lines(report, args.dry_run) + _reaped_lines(reaped, args.dry_run))
    return 0


def _prune_lines(report, dry_run: bool) -> list[str]:
    """The reference's summary: "no stale entries" only for an all-zero tally, else its counts."""
    if not any((report.pruned, report.orphaned_locks, report.live, report.unprobed)):
        return ["no stale entries to prune (dry run)" if dry_run else "no stale entries to prune"]
    counts = f"{report.pruned} stale ({report.orphaned_locks} orphaned locks)"
    if not dry_run:
        return [f"pruned {counts}, kept {report.live} live, left {report.unprobed} unprobeable"]
    lines = []
    for candidate in report.candidates:
        if candidate["kind"] == "orphaned_lock":
            lines.append(f"would prune orphaned lock {output.cell(candidate['lock_file_name'])}")
            continue
        line = f"would prune entry run_id={output.cell(candidate['run_id'])} started_at={candidate['started_at']}"
        if candidate["socket_dir"] is not None:
            line += f" socket_dir={output.cell(candidate['socket_dir'])}"
        lines.append(line)
    return lines + [f"would prune {counts}, keep {report.live} live, leave {report.unprobed} unprobeable"]


def _reaped_lines(reaped, dry_run: bool) -> list[str]:
    """What dead runners left on the host: one line per group and directory, one per leftover."""
    verb = "would end" if dry_run else "ended"
    lines = [f"{verb} cgroup {output.cell(path)}" for path in reaped.groups]
    lines += [f"{verb} process group {pgid}" for pgid in reaped.process_groups]
    lines += [
        f"{'would remove' if dry_run else 'removed'} run directory {output.cell(path)}" for path in reaped.run_dirs
    ]
    lines += [f"left {output.cell(item['what'])}: {item['reason']}" for item in reaped.left]
    if reaped.processes or reaped.groups or reaped.process_groups or reaped.run_dirs:
        lines.append(
            f"{verb} {plural(reaped.processes, 'process', 'processes')} of dead runners "
            f"({plural(len(reaped.groups), 'cgroup')}, {plural(len(reaped.process_groups), 'process group')}, "
            f"{plural(len(reaped.run_dirs), 'run directory', 'run directories')})"
        )
    return lines


COMMANDS = {"list": list_runs, "wait": wait, "prune": prune}
# Each subcommand's parser (also for completion and the man pages: cli/parsers.py).
PARSERS = {"list": list_parser, "wait": wait_parser, "prune": prune_parser}
