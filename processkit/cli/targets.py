"""How a client names the runs it acts on: ``--run-id ID``, or ``--all`` narrowed by
``--label K=V`` (AND, exact match). Every client parser goes through ``select``, the one place
that decides what happens when the required target is missing."""

from __future__ import annotations


from ..errors import usage
from ..grammar import values
from .parsing import Once, OnceFlag, Parser
from ..plain import Frozen


class Selection(Frozen):
    run_id: str | None  # None means --all
    labels: dict


def add_arguments(parser: Parser, *, fan_out: bool = True) -> None:
    parser.add_argument("--run-id", action=Once, metavar="ID", help="the run to act on (default: read from stdin)")
    if fan_out:
        parser.add_argument("--all", action=OnceFlag, help="every live run (narrowed by --label)")
        parser.add_argument(
            "--label",
            action="append",
            default=[],
            metavar="K=V",
            help="only runs with this label; repeatable; needs --all",
        )


def labels(texts: list[str]) -> dict:
    return dict(values.parse_label(text) for text in texts)


def select(args, invocation, *, fan_out: bool = True) -> Selection:
    """The validated selection; records the run id on the invocation for the error envelope."""
    fan_all = fan_out and args.all
    if args.run_id is not None and fan_all:
        raise usage("the argument '--run-id <ID>' cannot be used with '--all'")
    if fan_out and args.label and not fan_all:
        raise usage("the argument '--label <K=V>' requires '--all'")
    if args.run_id is None and not fan_all:
        args.run_id = missing_required("--run-id <ID>|--all" if fan_out else "--run-id <ID>")
    if fan_all:
        return Selection(None, labels(args.label))
    invocation.run_id = values.parse_run_id(args.run_id)
    return Selection(invocation.run_id, {})


def missing_required(wanted: str) -> str:
    """The value for the first required argument left unset on the command line: the run id
    may arrive on stdin (the first-byte probe, docs/adr-0203-stdin-probe.md); otherwise this is
    a usage error."""
    from .stdin_probe import probe_stdin

    piped = probe_stdin("run id")
    if piped is None:
        raise usage(f"the following required arguments were not provided: {wanted}")
    return piped
