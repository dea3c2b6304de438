"""What a control client accepts from a runner: the reply's shape is checked by the one
schema validator (``replies.schema.json``, beside the event schema's), then what no schema
can say (this run, this verb, a readable version, a real date); the reply is handed on in this
build's own shape, never as received (docs/control-plane.md §1.3)."""

from __future__ import annotations

from typing import Callable

from ..spec import MECHANISMS  # the mechanisms this build can name; anything newer is "unknown"
from ..errors import Failure, Kind
from ..registry.lookup import refusal
from ..registry.records import valid_started_at
from . import protocol

REPLIES_SCHEMA_FILE = "replies.schema.json"
MEMBER_FIELDS = ("pid", "ppid", "name", "start_time")

Check = Callable[[dict, str, str], dict]


def _unreadable(action: str, run_id: str, what: str) -> Failure:
    """A reply this client cannot read as the verb's answer (103, ``control_unreachable``)."""
    return refusal(action, run_id, f"{protocol.UNREADABLE}: {what}")


def _other_run(action: str, run_id: str, what: str) -> Failure:
    return refusal(action, run_id, f"the runner returned {what} for a different run")


def _version(action: str, run_id: str, declared: int, reads: str, what: str) -> Failure:
    """A version this client does not read (``incompatible_contract``), in the reference's words."""
    if what == "snapshot":
        side = (
            "the runner is a newer build than this client, so what its version changed is unknown here"
            if declared > protocol.SNAPSHOT_VERSION
            else "the runner is older than any build this client still decodes"
        )
        said = f"control-plane snapshot version {declared}, and this client reads versions {reads} ({side})"
        meant = "rendered under semantics its sender never promised"
    else:  # an attestation, or the ``usage`` extension's figures
        said = f"control-plane {what} version {declared}, and this client reads version {reads}"
        meant = "read as a membership verdict" if what == "attestation" else "read as figures"
        meant += " its sender never promised"
    asking = "read this run's usage" if what == "usage" else f"{action} this run"
    detail = (
        f"the runner answered with {said}; the reply was refused rather than {meant} — {asking} with "
        f"a processkit-cli build that implements its {what} version"
    )
    if what == "snapshot":
        detail += " (for a newer runner, one at least as new as the binary that started the run)"
    return refusal(action, run_id, detail, Kind.INCOMPATIBLE_CONTRACT)


def _readable_version(
    reply: dict, what: str, action: str, run_id: str, newest: int, oldest: int | None = None
) -> object:
    """The reply's ``<what>_version``, refused first when this client does not read it, so that a
    newer (or older) runner is told apart from a malformed reply; ``oldest`` only where a range is read."""
    version = reply.get(f"{what}_version")
    if type(version) is int and version >= 0 and not (newest if oldest is None else oldest) <= version <= newest:
        reads = str(newest) if oldest is None else f"{oldest} to {newest}"
        raise _version(action, run_id, version, reads, what)
    return version


def _conforms(reply: dict, shape: str) -> bool:
    from ..events.validate import packaged_validator

    validator = packaged_validator(__package__, REPLIES_SCHEMA_FILE)
    return validator.is_valid(reply, validator.definition(shape))


def _mechanism(value: str) -> str:
    return value if value in MECHANISMS else "unknown"


def _int(value):
    """A JSON integer as this build writes it (``2.0`` on the wire is ``2`` here)."""
    return None if value is None else int(value)


NOT_ACKNOWLEDGED = "the runner did not acknowledge the command"


def ack_check(verb: str, declined: str = NOT_ACKNOWLEDGED) -> Check:
    """The check for ``verb``'s acknowledgement: accepted, for this verb, for this run. As the
    reference's ack_matches, any bool and strings are an acknowledgement's shape; one declining,
    or for another verb or run, is ``declined`` (``--all`` names its snapshotted target)."""

    def check(reply: dict, run_id: str, action: str) -> dict:
        if not _conforms(reply, "ack"):
            raise _unreadable(action, run_id, "it is not an acknowledgement")
        if reply["accepted"] is not True or reply["action"] != verb or reply["run_id"] != run_id:
            raise refusal(action, run_id, declined)
        return protocol.ack(verb, run_id)

    return check


def check_snapshot(reply: dict, run_id: str, action: str) -> dict:
    version = _readable_version(reply, "snapshot", action, run_id, protocol.SNAPSHOT_VERSION, oldest=1)
    if not _conforms(reply, "snapshot") or not valid_started_at(reply["started_at"]):
        raise _unreadable(action, run_id, "it does not have the documented shape of a snapshot")
    if reply["run_id"] != run_id:
        raise _other_run(action, run_id, "a snapshot")
    return {
        "snapshot_version": version,
        "run_id": run_id,
        "mechanism": _mechanism(reply["mechanism"]),
        "root_pid": _int(reply.get("root_pid")),
        "started_at": reply["started_at"],
        "jsonl": reply.get("jsonl"),
        "capture_dir": reply.get("capture_dir"),
        "members": [
            {
                "pid": _int(m["pid"]),
                "ppid": _int(m.get("ppid")),
                "name": m.get("name"),
                "start_time": m.get("start_time"),
            }
            for m in reply["members"]
        ],
    }


def check_attestation(reply: dict, run_id: str, action: str) -> dict:
    _readable_version(reply, "attestation", action, run_id, protocol.ATTESTATION_VERSION)
    if not _conforms(reply, "attestation") or not valid_started_at(reply["checked_at"]):
        raise _unreadable(action, run_id, "it does not have the documented shape of an attestation")
    if reply["run_id"] != run_id:
        raise _other_run(action, run_id, "an attestation")
    verdict, pid = reply["verdict"], reply["peer_pid"]
    decided = verdict in ("member", "not_a_member")
    if (pid is None or pid < 1) if decided else pid is not None:
        raise _unreadable(action, run_id, f"an attestation whose peer_pid {pid!r} does not fit its verdict {verdict}")
    return {
        "attestation_version": protocol.ATTESTATION_VERSION,
        "run_id": run_id,
        "verdict": verdict,
        "peer_pid": _int(pid),
        "mechanism": _mechanism(reply["mechanism"]),
        "checked_at": reply["checked_at"],
    }


def check_usage(reply: dict, run_id: str, action: str) -> dict:
    """The ``usage`` extension's reply: this run's figures, as this build names them."""
    from ..containment.accounting import Usage

    _readable_version(reply, "usage", action, run_id, protocol.USAGE_VERSION)
    if not _conforms(reply, "usage"):
        raise _unreadable(action, run_id, "it does not have the documented shape of a usage reply")
    if reply["run_id"] != run_id:
        raise _other_run(action, run_id, "the usage")
    return {"usage_version": protocol.USAGE_VERSION, "run_id": run_id, **Usage.from_json(reply).as_json()}
