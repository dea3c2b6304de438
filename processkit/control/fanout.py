"""``--all``: one verb sent to every run that was live when the registry was read once, one
at a time, each re-probed just before its turn; every target gets exactly one outcome
(docs/control-plane.md §1.6)."""

from __future__ import annotations

from ..errors import Failure, Kind, os_error_words
from ..plain import Frozen
from ..registry import scan
from ..registry.lock import Health
from ..registry.lookup import refusal
from .replies import Check
from .transport import Channel


REREAD_FAILED = "could not re-read the snapshotted registry record"


class TargetResult(Frozen):
    run_id: str
    status: str  # the verb's success word, "already_gone" or "failed"
    reply: dict | None = None
    error: str | None = None


def request_all(verb: str, labels: dict, check: Check, success: str) -> list[TargetResult]:
    targets = [
        e for e in scan.read(Kind.REGISTRY_SETUP).entries if e.record.matches(labels) and e.health() is Health.LIVE
    ]
    return [_request_one(target, verb, check, success) for target in targets]


def _request_one(target: scan.Entry, verb: str, check: Check, success: str) -> TargetResult:
    run_id = target.record.run_id
    problem = _changed(target, verb)
    if problem is not None:
        return TargetResult(run_id, problem[0], error=problem[1])
    try:
        with Channel(target.record.endpoint, run_id, verb) as channel:
            reply = check(channel.request(verb), run_id, verb)
    except Failure as failure:
        if _gone(target):
            return TargetResult(run_id, "already_gone")
        return TargetResult(run_id, "failed", error=failure.message)
    return TargetResult(run_id, success, reply=reply)


def _gone(target: scan.Entry) -> bool:
    return not target.exists() or target.health() is Health.STALE


def _changed(target: scan.Entry, verb: str) -> tuple[str, str | None] | None:
    """Why ``target`` may no longer be addressed, as (status, error); None when it may. The
    error is the reference's per-target sentence (``cannot cancel run `x`: ...``)."""
    run_id = target.record.run_id
    try:
        record = scan.reread(target.path)
    except FileNotFoundError:
        return "already_gone", None
    except OSError as exc:  # as the reference's probe_entry: the system's error
        return "failed", refusal(verb, run_id, f"{REREAD_FAILED}: {os_error_words(exc)}").message
    if record is None:
        why = f"{REREAD_FAILED}: the registry record no longer passes validation"
    else:
        health = target.probe()[0] if record.lock_file == target.record.lock_file else None
        if health is Health.STALE:
            return "already_gone", None
        if health is Health.UNPROBED:
            why = "the snapshotted entry's liveness could not be re-probed, so it is not confirmed gone"
        elif health is None or record.run_id != run_id or record.endpoint != target.record.endpoint:
            why = "the snapshotted registry record changed identity before dispatch; refusing to act on its replacement"
        elif record.endpoint is None:
            why = "the run is live but exposes no control endpoint"
        else:
            return None
    return "failed", refusal(verb, run_id, why).message
