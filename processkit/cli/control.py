"""``inspect``, ``cancel``, ``kill`` and ``attest``: the clients that talk to a live run over
its control socket (docs/control-plane.md §1.3-§1.6)."""

from __future__ import annotations

from functools import partial

from ..control import fanout, replies
from ..control.client import request_by_id
from ..errors import Failure, Kind
from . import output, targets
from .parsing import OnceFlag, Parser

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

SNAPSHOT_FIELDS = ("snapshot_version", "run_id", "mechanism", "root_pid", "started_at", "jsonl", "capture_dir")
ATTESTATION_FIELDS = ("attestation_version", "run_id", "verdict", "peer_pid", "mechanism", "checked_at")


def main(argv: list[str], invocation) -> int:
    return COMMANDS[invocation.operation](argv, invocation)


def _parser(
    name: str, usage: str, *, fan_out: bool = True, json_flag: bool = True, description: str | None = None
) -> Parser:
    parser = Parser(prog=f"processkit-cli {name}", usage=f"processkit-cli {name} {usage}", description=description)
    targets.add_arguments(parser, fan_out=fan_out)
    if json_flag:
        parser.add_argument("--json", action=OnceFlag, help="print the reply as one JSON line (default: human text)")
    return parser


def _fail_if_any_failed(outcomes: list[fanout.TargetResult], verb: str) -> None:
    """After the whole report is printed: 103 if any target failed, counted as the reference does."""
    failed = sum(outcome.status == "failed" for outcome in outcomes)
    if failed:
        what = (
            "could not be inspected" if verb == "inspect" else f"could not be reached or did not acknowledge the {verb}"
        )
        raise Failure(
            Kind.CONTROL_UNREACHABLE,
            f"{verb} --all: {failed} of {len(outcomes)} target run(s) {what}; see the report above for the per-run reason",
        )


# -- inspect ----------------------------------------------------------------------------------
def inspect(argv: list[str], invocation) -> int:
    args = PARSERS["inspect"]().parse(argv)
    selection = targets.select(args, invocation)
    if args.usage:
        return _usage(args, selection)
    if selection.run_id is not None:
        snapshot = request_by_id(selection.run_id, "inspect", replies.check_snapshot)
        if args.json:
            output.json_line(snapshot)
        else:
            output.lines(render_snapshot(snapshot))
        return 0
    outcomes = fanout.request_all("inspect", selection.labels, replies.check_snapshot, "inspected")
    if args.json:
        output.json_line(
            [{"run_id": o.run_id, "status": o.status, "snapshot": o.reply, "error": o.error} for o in outcomes]
        )
    else:
        output.lines(render_inspect_all(outcomes))
    _fail_if_any_failed(outcomes, "inspect")
    return 0


def _usage(args, selection) -> int:
    """``inspect --usage`` (an extension): the live run's accounting so far, one run at a time."""
    from .. import errors

    if selection.run_id is None:
        raise errors.usage("the argument '--usage' needs '--run-id', not '--all'")
    reply = request_by_id(selection.run_id, "usage", replies.check_usage)
    if args.json:
        output.json_line(reply)
    else:
        sources = reply["sources"]
        figures = [(key, value) for key, value in reply.items() if key not in ("sources", "usage_version")]
        output.lines(
            output.fields([(key, value if value is not None else "not accounted") for key, value in figures])
            + [f"{key} from {source}" for key, source in sources.items()]
        )
    return 0


def render_snapshot(snapshot: dict) -> list[str]:
    members = snapshot["members"]
    lines = output.fields([(key, snapshot[key]) for key in SNAPSHOT_FIELDS] + [("members", len(members) or "(none)")])
    if members:
        rows = [[output.cell(m[key]) for key in ("pid", "ppid", "name", "start_time")] for m in members]
        lines += ["  " + line for line in output.table(("PID", "PPID", "NAME", "START_TIME"), rows)]
    return lines


def render_inspect_all(outcomes: list[fanout.TargetResult]) -> list[str]:
    if not outcomes:
        return ["no live runs to inspect"]
    rows = [[output.cell(o.run_id), o.status, output.cell(o.error)] for o in outcomes]
    lines = output.table(("RUN_ID", "STATUS", "ERROR"), rows)
    for outcome in outcomes:
        if outcome.reply is not None:
            lines += ["", f"snapshot for {output.cell(outcome.run_id)}:"]
            lines += ["  " + line for line in render_snapshot(outcome.reply)]
    return lines


# -- cancel / kill ----------------------------------------------------------------------------
def stop(argv: list[str], invocation) -> int:
    """Output is always JSON: the acknowledgement, or the per-target report of --all."""
    verb = invocation.operation
    args = PARSERS[verb]().parse(argv)
    selection = targets.select(args, invocation)
    if selection.run_id is not None:
        output.json_line(request_by_id(selection.run_id, verb, replies.ack_check(verb)))
        return 0
    check = replies.ack_check(verb, f"{replies.NOT_ACKNOWLEDGED} for the snapshotted target")
    outcomes = fanout.request_all(verb, selection.labels, check, "accepted")
    output.json_line(
        [
            {"run_id": o.run_id, "accepted": o.status == "accepted", "status": o.status, "error": o.error}
            for o in outcomes
        ]
    )
    _fail_if_any_failed(outcomes, verb)
    return 0


# -- attest -----------------------------------------------------------------------------------
def attest(argv: list[str], invocation) -> int:
    """The runner's verdict on the calling process; printed whatever it is, then mapped to the
    exit code (a decided "not a member" is 115, an undecidable identity 103)."""
    args = PARSERS["attest"]().parse(argv)
    run_id = targets.select(args, invocation, fan_out=False).run_id
    assert run_id is not None  # without --all a selection is always one run
    attestation = request_by_id(run_id, "attest", replies.check_attestation)
    if args.json:
        output.json_line(attestation)
    else:
        output.lines(output.fields([(key, attestation[key]) for key in ATTESTATION_FIELDS]))
    verdict = attestation["verdict"]
    if verdict == "not_a_member":  # the reference's words
        peer = "unknown" if attestation["peer_pid"] is None else attestation["peer_pid"]
        raise Failure(
            Kind.NOT_A_MEMBER,
            f"this process is not a member of run `{run_id}`: the runner named the connecting process (pid {peer}) "
            f"from the control transport and it is not in that run's {output.cell(attestation['mechanism'])} container",
        )
    if verdict == "peer_identity_unsupported":
        raise Failure(
            Kind.PEER_IDENTITY_UNSUPPORTED,
            f"cannot attest run `{run_id}`: the runner could not obtain a kernel-authenticated identity for this "
            "client from the control transport, so it refused to answer either way rather than report an unproven "
            "membership; check `probe --json --require-surface attest:peer-identity` against the runner's own "
            "binary before relying on attestation on this platform",
        )
    return 0


COMMANDS = {"inspect": inspect, "cancel": stop, "kill": stop, "attest": attest}
_FAN_OUT_USAGE = "(--run-id <ID> | --all [--label <K=V>]...)"


def _inspect_parser() -> Parser:
    parser = _parser("inspect", f"{_FAN_OUT_USAGE} [--json] [--usage]")
    parser.add_argument(
        "--usage", action=OnceFlag, help="extension: the live run's accounting so far (one --run-id), not its snapshot"
    )
    return parser


# A kill's code is 109 only for a run it finds running: one already in a graceful stop's grace
# keeps that stop's ending (docs/control-plane.md, the `kill` row).
_KILL = (
    "Hard-kill a live run, with no grace; it exits 109. A run already stopping (a cancel, "
    "a timeout, a stop signal) keeps that stop's code (108, 106, 107): the kill cuts its grace short."
)


# Each subcommand's parser, built on demand (also for completion and the man pages: cli/parsers.py).
PARSERS: dict[str, Callable[[], Parser]] = {
    "inspect": _inspect_parser,
    "cancel": partial(_parser, "cancel", _FAN_OUT_USAGE, json_flag=False),
    "kill": partial(_parser, "kill", _FAN_OUT_USAGE, json_flag=False, description=_KILL),
    "attest": partial(_parser, "attest", "--run-id <ID> [--json]", fan_out=False),
}
