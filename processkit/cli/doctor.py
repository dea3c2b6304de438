"""``doctor``: qualify this host by doing what a run does, for real, and report what was
observed (docs/control-plane.md §4). The qualification itself is
``processkit.doctor``; this module parses, prints and maps the verdict to the exit code.

The report is rendered here: the same facts as ``--json``, one labelled line each.

``probe`` says what this binary is; ``doctor`` says what this host did. The ``--require-*``
flags take any string and only decide the exit code (116, a mismatch naming the required and
the observed value); the report is the same either way.
"""

from __future__ import annotations

from ..errors import Failure, Kind, usage
from ..grammar import values
from . import output
from .options import flag_given
from .parsing import Once, OnceFlag, Parser

DEFAULT_TIMEOUT_MS = 30_000
PHASE_FLAGS = (
    "json",
    "timeout",
    "check_resource_controller",
    "require_mechanism",
    "require_abrupt_cleanup",
    "require_resource_controller",
    "require_accounting",
)


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli doctor",
        usage="processkit-cli doctor [--json] [--timeout <DUR>] [--check-resource-controller] "
        "[--require-mechanism <NAME>] [--require-abrupt-cleanup <LEVEL>] [--require-resource-controller] "
        "[--require-accounting <MECHANISM>]",
        description="Qualify this host with a real, bounded scratch run.",
    )
    add = parser.add_argument
    add("--json", action=OnceFlag, help="the report as one JSON line")
    add("--timeout", action=Once, metavar="DUR", help="the whole qualification's budget (default 30s)")
    add("--check-resource-controller", action=OnceFlag, help="also check that a whole-tree cap can be installed")
    add(
        "--require-mechanism",
        action=Once,
        metavar="NAME",
        help="require exactly this containment mechanism (job_object, cgroup_v2, process_group, process_reaper, unknown)",
    )
    add(
        "--require-abrupt-cleanup",
        action=Once,
        metavar="LEVEL",
        help="require exactly this abrupt-cleanup level (whole_tree, direct_child_only, none)",
    )
    add(
        "--require-resource-controller",
        action=OnceFlag,
        help="fail (116) unless a whole-tree cap can be installed; needs --check-resource-controller",
    )
    add(
        "--require-accounting",
        action=Once,
        metavar="MECHANISM",
        help="extension: require per-run accounting through exactly this (cgroup_v1, cgroup_v2, rusage, joined by +, or none)",
    )
    add("--scratch-child", action=Once, metavar="DUR", help="be the harmless scratch child: sleep, exit 0")
    return parser


def main(argv: list[str], invocation) -> int:
    args = build_parser().parse(argv)
    if args.scratch_child is not None:
        if any(flag_given(args, flag) for flag in PHASE_FLAGS):
            raise usage("the argument '--scratch-child <DUR>' cannot be used with any other argument")
        from ..doctor.scratch import be_scratch_child

        return be_scratch_child(values.parse_duration_ms(args.scratch_child, "--scratch-child", positive=True))
    if args.require_resource_controller and not args.check_resource_controller:
        raise usage("the argument '--require-resource-controller' requires '--check-resource-controller'")
    timeout_ms = DEFAULT_TIMEOUT_MS
    if args.timeout is not None:
        timeout_ms = values.parse_duration_ms(args.timeout, "--timeout", positive=True)
    from ..doctor.findings import Requirements, unqualified_message
    from ..doctor.qualification import qualify
    from .selfexec import program

    wanted = Requirements(
        args.require_mechanism, args.require_abrupt_cleanup, args.require_resource_controller, args.require_accounting
    )
    report, limit_backend, accounting = qualify(
        program(), timeout_ms, wanted, check_resources=args.check_resource_controller
    )
    if args.json:
        output.json_line(report)
    else:
        output.lines(render(report, limit_backend, accounting))
    if not report["qualified"]:
        raise Failure(Kind.HOST_UNQUALIFIED, unqualified_message(report))
    return 0


def _yes(flag: bool) -> str:
    return "true" if flag else "false"  # the reference prints its booleans as they are


def render(report: dict, limit_backend: str | None, accounting=None) -> list[str]:
    """The same facts for a person; every value that came from outside is sanitized."""
    cell = output.cell
    verdict = "qualified" if report["qualified"] else "NOT qualified"
    lines = [f"processkit-cli {report['version']} on {report['os']}: {verdict} ({report['elapsed_ms']}ms)"]
    facts = []
    registry = report["registry"]
    if registry is not None:
        facts.append(
            (
                "registry",
                f"{cell(registry['dir'])} (owner-only: {_yes(registry['owner_only'])}, {registry['protection']})",
            )
        )
    containment = report["containment"]
    if containment is not None:
        facts.append(
            ("containment", f"{cell(containment['mechanism'])} (abrupt cleanup: {cell(containment['abrupt_cleanup'])})")
        )
    control = report["control"]
    if control is not None:
        source = control["terminal_source"]
        facts.append(
            (
                "control",
                f"{cell(control['endpoint'])} ({control['transport']}); inspect saw {control['inspected_members']} member(s), "
                f"cancel acknowledged: {_yes(control['cancel_acknowledged'])}, "
                + (
                    f"run ended with source `{cell(source)}`"
                    if source
                    else "run ended without reporting a terminal event"
                ),
            )
        )
    cleanup = report["cleanup"]
    if cleanup is not None:
        inconclusive = (
            "" if cleanup["teardown_snapshot_conclusive"] else ", post-kill snapshot inconclusive on this mechanism"
        )
        remaining = "unreported" if cleanup["remaining"] is None else cleanup["remaining"]
        facts.append(
            (
                "cleanup",
                f"confirmed empty: {_yes(cleanup['confirmed_empty'])} (kill error: {_yes(cleanup['kill_error'])}, "
                f"read error: {_yes(cleanup['read_error'])}, remaining: {remaining}{inconclusive}); "
                f"record removed: {_yes(cleanup['registry_record_removed'])}, "
                f"endpoint released: {_yes(cleanup['endpoint_released'])}, scratch removed: {_yes(cleanup['scratch_removed'])}",
            )
        )
    resources = report["resource_controller"]
    if resources is not None:
        # The reference says why a cap is not enforceable; this build also names what carries one.
        why = cell(resources["detail"]) if resources["detail"] else limit_backend and f"via {limit_backend}"
        why = f" ({why})" if why else ""
        facts.append(("resources", f"`{resources['requested']}` enforceable: {_yes(resources['available'])}{why}"))
    if accounting is not None:
        counted = ", ".join(f"{field} from {source}" for field, source in accounting.counters.items() if source)
        missing = [field for field, source in accounting.counters.items() if not source]
        text = f"{accounting.mechanism}" + (f" ({counted})" if counted else "")
        text += f"; not accounted: {', '.join(missing)}" if missing else ""
        facts.append(("accounting", text + (f"; {accounting.detail}" if accounting.detail else "")))
    facts.append(
        (
            "phases",
            ", ".join(f"{p['phase']} {'' if p['ok'] else 'FAILED '}{p['elapsed_ms']}ms" for p in report["phases"]),
        )
    )
    facts += [("failure", cell(failure)) for failure in report["failures"]]
    facts += [("mismatch", cell(mismatch)) for mismatch in report["mismatches"]]
    lines += [f"  {label + ':':<11} {text}" for label, text in facts]
    if report["diagnostics_dir"] is not None:
        lines.append(f"  diagnostics kept in {cell(report['diagnostics_dir'])}")
    return lines
