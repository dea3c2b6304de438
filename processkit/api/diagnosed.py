"""A result's ``diagnostics``: the lines the CLI's run would have written on its stderr for the same
run, from the runner service's reply (``service.request.Request.report``), whose own warnings have
no reader: its failure as the CLI's JSON envelope, then what the run lost or left, each line said
to the caller as a warning too (``launch.Call.warned``)."""

from __future__ import annotations

import json


def said(report: dict, run_id: str | None) -> str:
    """The run's lines (empty for a run that lost and left nothing)."""
    failure = report.get("failure")
    diagnostics = ""
    if failure is not None:
        from ..grammar import KEYWORDS
        from ..grammar.keywords import reworded

        kind, message, retryable = failure
        envelope = {
            "error_version": 1,
            "code": report["code"],
            "kind": kind,
            "operation": "run",
            "run_id": run_id,
            "retryable": retryable,
            "message": reworded(message, KEYWORDS),
        }
        diagnostics = json.dumps(envelope, ensure_ascii=False, separators=(",", ":")) + "\n"
    if report.get("stream_failure"):
        diagnostics += f"processkit: warning: JSONL event logging disabled: {report['stream_failure']}\n"
    for text in report.get("echo_lost") or ():  # said too (``Call.warned``)
        diagnostics += f"processkit: warning: {text}\n"
    if report.get("left_running"):  # said too (``Call.warned``), as the CLI's run warns it
        diagnostics += f"processkit: warning: {report['left_running']}\n"
    for what, path in report.get("unread") or ():  # never a silent None: the file is there, unread
        diagnostics += f"processkit: the run's {what} not read back: {path} is no file this user may read\n"
    for what, size, why in report.get("unkept") or ():  # never a silent None: said (``Call.warned`` warns too)
        diagnostics += f"processkit: the run's {what} not returned ({size} bytes): {why}\n"
    return diagnostics
