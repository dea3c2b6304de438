"""The control clients' side of the plane: resolve a run id to exactly one live run, talk to
its socket within deadlines, and accept only replies that keep the contract
(control-plane.md §1.3-§1.6). Every failure is a Failure with a CONTROL-family kind."""

from __future__ import annotations

import dataclasses
import socket
import time
from typing import Callable

from ..containment import MECHANISMS
from ..errors import Failure, Kind
from ..registry import scan
from ..registry.lock import Health
from ..registry.records import valid_started_at
from ..spec import U32_MAX
from ..text import is_terminal_unsafe, sanitize
from . import protocol

CONNECT_SECONDS = 5.0
EXCHANGE_SECONDS = 5.0
MAX_PEER_TEXT = 500
VERDICTS = ("member", "not_a_member", "peer_identity_unsupported")


def resolve(run_id: str) -> scan.Entry:
    """The one live run named ``run_id`` that publishes an endpoint."""
    found = [(entry, entry.health()) for entry in scan.read(Kind.REGISTRY_BY_ID).entries if entry.record.run_id == run_id]
    live = [entry for entry, health in found if health is Health.LIVE]
    if not live:
        if not found:
            raise Failure(Kind.NOT_FOUND, f"no run with id '{run_id}' is registered")
        if any(health is Health.UNPROBED for _, health in found):
            raise Failure(Kind.UNPROBED, f"the liveness of run '{run_id}' could not be probed")
        raise Failure(Kind.STALE, f"run '{run_id}' is not live: its runner is gone (prune removes the entry)")
    if len(live) > 1:
        raise Failure(Kind.AMBIGUOUS_RUN_ID, f"run id '{run_id}' names {len(live)} live runs")
    entry = live[0]
    if entry.record.endpoint is None:
        raise Failure(Kind.CONTROL_UNREACHABLE, f"run '{run_id}' published no control endpoint")
    return entry


def peer_text(text: str) -> str:
    """A runner's error text made safe to show: control runs collapsed to a space, capped."""
    out: list[str] = []
    for ch in text:
        if is_terminal_unsafe(ch):
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(ch)
    clean = "".join(out).strip()
    return clean if len(clean) <= MAX_PEER_TEXT else clean[:MAX_PEER_TEXT] + "..."


class Channel:
    """One connection to a run's control socket: connect, then one request and its reply."""

    def __init__(self, endpoint: str, run_id: str):
        self.run_id = run_id
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(CONNECT_SECONDS)
        try:
            self._sock.connect(endpoint)
        except TimeoutError:
            self.close()
            raise Failure(Kind.IPC_DEADLINE, f"run '{run_id}' did not accept a connection within {CONNECT_SECONDS:g}s") from None
        except (OSError, ValueError) as exc:
            self.close()
            reason = getattr(exc, "strerror", None) or exc
            where = sanitize(endpoint)
            raise Failure(Kind.CONTROL_UNREACHABLE, f"cannot reach run '{run_id}' at {where}: {reason}") from None

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def request(self, verb: str) -> dict:
        """Send ``verb``, return the reply object; a runner's ``{"error":..}`` is a Failure."""
        deadline = time.monotonic() + EXCHANGE_SECONDS
        try:
            self._within(deadline)
            self._sock.sendall(verb.encode() + b"\n")
            line = self._read_line(deadline)
        except TimeoutError:
            raise Failure(Kind.IPC_DEADLINE, f"run '{self.run_id}' did not answer within {EXCHANGE_SECONDS:g}s") from None
        except OSError as exc:
            raise Failure(Kind.CONTROL_UNREACHABLE, f"lost the connection to run '{self.run_id}': {exc.strerror or exc}") from None
        try:
            reply = protocol.decode(line)
        except (ValueError, RecursionError):
            reply = None
        if not isinstance(reply, dict):
            raise Failure(Kind.INCOMPATIBLE_CONTRACT, f"run '{self.run_id}' sent a reply that is not a JSON object")
        if isinstance(reply.get("error"), str):
            raise Failure(Kind.CONTROL_UNREACHABLE, f"run '{self.run_id}' refused the request: {peer_text(reply['error'])}")
        return reply

    def _within(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError()
        self._sock.settimeout(remaining)

    def _read_line(self, deadline: float) -> bytes:
        data = bytearray()
        while b"\n" not in data:
            if len(data) >= protocol.MAX_LINE:
                raise Failure(Kind.CONTROL_UNREACHABLE, f"run '{self.run_id}' sent a reply over {protocol.MAX_LINE} bytes")
            self._within(deadline)
            chunk = self._sock.recv(protocol.MAX_LINE - len(data))
            if not chunk:
                raise Failure(Kind.CONTROL_UNREACHABLE, f"run '{self.run_id}' closed the connection without a reply")
            data += chunk
        return bytes(data[: data.index(b"\n")])


# -- reply checks: each returns the reply in this build's own shape, or raises -------------------
def _contract(run_id: str, what: str) -> Failure:
    return Failure(Kind.INCOMPATIBLE_CONTRACT, f"run '{run_id}' sent {what}")


def _is_int(value, low: int = 0, high: int = U32_MAX) -> bool:
    return type(value) is int and low <= value <= high


def _optional(value, check: Callable[[object], bool]) -> bool:
    return value is None or check(value)


def _is_str(value) -> bool:
    return isinstance(value, str)


def ack_check(verb: str) -> Callable[[dict, str], dict]:
    """The check for ``verb``'s acknowledgement: accepted, for this verb, for this run."""

    def check(reply: dict, run_id: str) -> dict:
        if reply.get("accepted") is not True or reply.get("action") != verb or reply.get("run_id") != run_id:
            raise _contract(run_id, f"an acknowledgement that does not accept '{verb}' for this run")
        return protocol.ack(verb, run_id)

    return check


def check_snapshot(reply: dict, run_id: str) -> dict:
    version = reply.get("snapshot_version")
    if not _is_int(version, 1, protocol.SNAPSHOT_VERSION):
        raise _contract(run_id, f"snapshot_version {version!r}, but this client reads 1 to {protocol.SNAPSHOT_VERSION}")
    if reply.get("run_id") != run_id:
        raise _contract(run_id, "a snapshot of a different run")
    members = reply.get("members")
    if not (
        isinstance(reply.get("mechanism"), str)
        and _optional(reply.get("root_pid"), _is_int)
        and valid_started_at(reply.get("started_at"))
        and _optional(reply.get("jsonl"), _is_str)
        and _optional(reply.get("capture_dir"), _is_str)
        and isinstance(members, list)
        and all(_valid_member(member) for member in members)
    ):
        raise _contract(run_id, "a snapshot that does not have the documented shape")
    mechanism = reply["mechanism"]
    return {
        "snapshot_version": version,
        "run_id": run_id,
        "mechanism": mechanism if mechanism in MECHANISMS else "unknown",
        "root_pid": reply.get("root_pid"),
        "started_at": reply["started_at"],
        "jsonl": reply.get("jsonl"),
        "capture_dir": reply.get("capture_dir"),
        "members": [{key: member.get(key) for key in ("pid", "ppid", "name", "start_time")} for member in members],
    }


def _valid_member(member) -> bool:
    return (
        isinstance(member, dict)
        and _is_int(member.get("pid"))
        and _optional(member.get("ppid"), _is_int)
        and _optional(member.get("name"), _is_str)
        and _optional(member.get("start_time"), _is_str)
    )


def check_attestation(reply: dict, run_id: str) -> dict:
    if not _is_int(reply.get("attestation_version"), protocol.ATTESTATION_VERSION, protocol.ATTESTATION_VERSION):
        raise _contract(run_id, f"attestation_version {reply.get('attestation_version')!r}, but this client reads 1")
    if reply.get("run_id") != run_id:
        raise _contract(run_id, "an attestation for a different run")
    verdict, pid = reply.get("verdict"), reply.get("peer_pid")
    decided = verdict in ("member", "not_a_member")
    if (
        verdict not in VERDICTS
        or not (_is_int(pid, 1) if decided else pid is None)
        or not isinstance(reply.get("mechanism"), str)
        or not valid_started_at(reply.get("checked_at"))
    ):
        raise _contract(run_id, "an attestation that does not have the documented shape")
    mechanism = reply["mechanism"]
    return {
        "attestation_version": protocol.ATTESTATION_VERSION,
        "run_id": run_id,
        "verdict": verdict,
        "peer_pid": pid,
        "mechanism": mechanism if mechanism in MECHANISMS else "unknown",
        "checked_at": reply["checked_at"],
    }


# -- by id and --all --------------------------------------------------------------------------
def request_by_id(run_id: str, verb: str, check: Callable[[dict, str], dict]) -> dict:
    """Resolve, connect and exchange one verb; a stop verb re-resolves on the open connection
    and goes ahead only if the registry still names the same endpoint."""
    entry = resolve(run_id)
    with Channel(entry.record.endpoint, run_id) as channel:
        if verb in protocol.STOP_VERBS and resolve(run_id).record.endpoint != entry.record.endpoint:
            raise Failure(Kind.CONTROL_UNREACHABLE, f"run '{run_id}' changed its endpoint while connecting")
        return check(channel.request(verb), run_id)


@dataclasses.dataclass(frozen=True)
class Outcome:
    run_id: str
    status: str  # the verb's success word, "already_gone" or "failed"
    reply: dict | None = None
    error: str | None = None


def request_all(verb: str, labels: dict, check: Callable[[dict, str], dict], success: str) -> list[Outcome]:
    """Send ``verb`` to every run that was live when the registry was read once, one at a time,
    re-probing each just before its turn."""
    targets = [e for e in scan.read(Kind.REGISTRY).entries if e.record.matches(labels) and e.health() is Health.LIVE]
    return [_request_one(target, verb, check, success) for target in targets]


def _request_one(target: scan.Entry, verb: str, check, success: str) -> Outcome:
    run_id = target.record.run_id
    problem = _changed(target)
    if problem is not None:
        return Outcome(run_id, problem[0], error=problem[1])
    try:
        with Channel(target.record.endpoint, run_id) as channel:
            reply = check(channel.request(verb), run_id)
    except Failure as failure:
        if _gone(target):
            return Outcome(run_id, "already_gone")
        return Outcome(run_id, "failed", error=failure.message)
    return Outcome(run_id, success, reply=reply)


def _gone(target: scan.Entry) -> bool:
    return not target.exists() or target.health() is Health.STALE


def _changed(target: scan.Entry) -> tuple[str, str | None] | None:
    """Why ``target`` may no longer be addressed, as (status, error); None when it may."""
    run_id = target.record.run_id
    try:
        record = scan.load(target.path)
    except FileNotFoundError:
        return "already_gone", None
    if record is None:
        return "failed", f"the registry record of run '{run_id}' is no longer readable"
    health = target.probe()[0] if record.lock_file == target.record.lock_file else None
    if health is Health.STALE:
        return "already_gone", None
    if health is Health.UNPROBED:
        return "failed", f"the liveness of run '{run_id}' could not be probed"
    if health is None or record.run_id != run_id or record.endpoint != target.record.endpoint:
        return "failed", f"the registry entry of run '{run_id}' changed since the registry was read"
    if record.endpoint is None:
        return "failed", f"run '{run_id}' published no control endpoint"
    return None
