"""A result's ``diagnostics``: the lines the CLI's run would have written on its stderr for the same
run, from the runner service's reply (``service.request.Request.report``), whose own warnings have
no reader: its failure as the CLI's JSON envelope, then what the run lost or left, each line said
to the caller as a warning too (``launch.Call.warned``)."""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

# How ``said`` opens each line of what the run lost or left, by its report key (``lost``).
_SAID = {
    "stream_failure": "processkit: warning: JSONL event logging disabled: ",
    "echo_lost": "processkit: warning: ",
    "left_running": "processkit: warning: ",  # as the CLI's run warns it
    "unread": "processkit: ",
    "unkept": "processkit: ",
}


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
    for key, text in lost(report):
        diagnostics += f"{_SAID[key]}{text}\n"
    return diagnostics


def lost(report: dict) -> Iterator[tuple[str, str]]:
    """What the run lost or left, ``(report key, words)`` in the order it is said: the report's
    keys walked once for ``said`` and for the warnings ``launch.Call.warned`` raises (all but
    ``unread``'s: never a silent None, the file is there, unread)."""
    if report.get("stream_failure"):
        yield "stream_failure", report["stream_failure"]
    for text in report.get("echo_lost") or ():  # the run's echo to the caller's stdout or stderr
        yield "echo_lost", text
    if report.get("left_running"):  # what the child's exit left running, ended by the teardown
        yield "left_running", report["left_running"]
    for what, path in report.get("unread") or ():
        yield "unread", f"the run's {what} not read back: {path} is no file this user may read"
    for what, size, why in report.get("unkept") or ():  # a capture the full scratch could not take
        yield "unkept", f"the run's {what} not returned ({size} bytes): {why}"
