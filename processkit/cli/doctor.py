"""``doctor``: qualify this host by doing what a run does, for real, and report what was
observed (docs/control-plane.md §4). The qualification itself is
``processkit.doctor``; this module parses, prints and maps the verdict to the exit code.

``probe`` says what this binary is; ``doctor`` says what this host did. The ``--require-*``
flags take any string and only decide the exit code (116, a mismatch naming the required and
the observed value); the report is the same either way.
"""

from __future__ import annotations

from ..errors import Failure, Kind, usage
from . import output, values
from .parsing import Once, OnceFlag, Parser, flag_given

DEFAULT_TIMEOUT_MS = 30_000
PHASE_FLAGS = (
    "json",
    "timeout",
    "check_resource_controller",
    "require_mechanism",
    "require_abrupt_cleanup",
    "require_resource_controller",
)


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli doctor",
        usage="processkit-cli doctor [--json] [--timeout <DUR>] [--check-resource-controller] "
        "[--require-mechanism <NAME>] [--require-abrupt-cleanup <LEVEL>] [--require-resource-controller]",
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
    add("--require-resource-controller", action=OnceFlag, help="needs --check-resource-controller")
    add("--scratch-child", action=Once, metavar="DUR", help="be the harmless scratch child: sleep, exit 0")
    return parser


def main(argv: list[str], invocation) -> int:
    args = build_parser().parse(argv)
    if args.scratch_child is not None:
        if any(flag_given(args, flag) for flag in PHASE_FLAGS):
            raise usage("the argument '--scratch-child <DUR>' cannot be used with any other argument")
        from ..doctor.scratch import be_scratch_child

        return be_scratch_child(values.parse_duration_ms(args.scratch_child, positive=True, flag="--scratch-child"))
    if args.require_resource_controller and not args.check_resource_controller:
        raise usage("the argument '--require-resource-controller' requires '--check-resource-controller'")
    timeout_ms = DEFAULT_TIMEOUT_MS
    if args.timeout is not None:
        timeout_ms = values.parse_duration_ms(args.timeout, positive=True, flag="--timeout")
    from ..doctor.findings import Requirements, unqualified_message
    from ..doctor.qualification import qualify
    from .selfexec import program

    wanted = Requirements(args.require_mechanism, args.require_abrupt_cleanup, args.require_resource_controller)
    report, limit_backend = qualify(program(), timeout_ms, wanted, check_resources=args.check_resource_controller)
    if args.json:
        output.json_line(report)
    else:
        from ..doctor.render import render

        output.lines(render(report, limit_backend))
    if not report["qualified"]:
        raise Failure(Kind.HOST_UNQUALIFIED, unqualified_message(report))
    return 0
