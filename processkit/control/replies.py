"""What a control client accepts from a runner: the reply's shape is checked by the one
schema validator (``replies.schema.json``, beside the event schema's), then what no schema
can say (this run, this verb, a readable version, a real date); the reply is handed on in this
build's own shape, never as received (docs/control-plane.md §1.3)."""

from __future__ import annotations

from typing import Callable

from ..spec import MECHANISMS  # the mechanisms this build can name; anything newer is "unknown"
from ..errors import Failure, Kind
from ..registry.records import valid_started_at
from . import protocol

REPLIES_SCHEMA_FILE = "replies.schema.json"
MEMBER_FIELDS = ("pid", "ppid", "name", "start_time")

Check = Callable[[dict, str, str], dict]


def _contract(action: str, run_id: str, what: str) -> Failure:
    return Failure(Kind.INCOMPATIBLE_CONTRACT, f"cannot {action} run `{run_id}`: the runner sent {what}")


def _conforms(reply: dict, shape: str) -> bool:
    from ..events.validate import packaged_validator

    validator = packaged_validator(__package__, REPLIES_SCHEMA_FILE)
    return validator.is_valid(reply, validator.definition(shape))


def _mechanism(value: str) -> str:
    return value if value in MECHANISMS else "unknown"


def _int(value):
    """A JSON integer as this build writes it (``2.0`` on the wire is ``2`` here)."""
    return None if value is None else int(value)


def ack_check(verb: str) -> Check:
    """The check for ``verb``'s acknowledgement: accepted, for this verb, for this run."""

    def check(reply: dict, run_id: str, action: str) -> dict:
        if not _conforms(reply, "ack") or reply["action"] != verb or reply["run_id"] != run_id:
            raise _contract(action, run_id, f"an acknowledgement that does not accept '{verb}' for this run")
        return protocol.ack(verb, run_id)

    return check


def check_snapshot(reply: dict, run_id: str, action: str) -> dict:
    version = reply.get("snapshot_version")
    if type(version) is not int or not 1 <= version <= protocol.SNAPSHOT_VERSION:
        raise _contract(
            action, run_id, f"snapshot_version {version!r}, but this client reads 1 to {protocol.SNAPSHOT_VERSION}"
        )
    if not _conforms(reply, "snapshot") or not valid_started_at(reply["started_at"]):
        raise _contract(action, run_id, "a snapshot that does not have the documented shape")
    if reply["run_id"] != run_id:
        raise _contract(action, run_id, "a snapshot of a different run")
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
    if not _conforms(reply, "attestation") or not valid_started_at(reply["checked_at"]):
        raise _contract(action, run_id, "an attestation that does not have the documented shape")
    if reply["run_id"] != run_id:
        raise _contract(action, run_id, "an attestation for a different run")
    verdict, pid = reply["verdict"], reply["peer_pid"]
    decided = verdict in ("member", "not_a_member")
    if (pid is None or pid < 1) if decided else pid is not None:
        raise _contract(action, run_id, f"an attestation whose peer_pid {pid!r} does not fit its verdict {verdict}")
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

    if reply.get("usage_version") != protocol.USAGE_VERSION or not _conforms(reply, "usage"):
        raise _contract(action, run_id, "a usage reply that does not have the documented shape")
    if reply["run_id"] != run_id:
        raise _contract(action, run_id, "the usage of a different run")
    return {"usage_version": protocol.USAGE_VERSION, "run_id": run_id, **Usage.from_json(reply).as_json()}
