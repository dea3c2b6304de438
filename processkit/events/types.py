"""One class per event type of schema version 1: read from a JSONL object, and built to be written.

Readers must survive newer runners, so parsing is lenient: a field this build does not know is
kept in ``extra`` (and written back after the known ones), a known field that is missing reads
as None, and an event type this build does not know becomes an :class:`UnknownEvent` holding
the whole object. Nothing here validates values: ``events.validate`` does that.

Nested objects (``command``, a member, a captured stream, ``shutdown``) are typed once, here,
as :class:`Command`, :class:`MemberInfo`, :class:`CapturedStream` and :class:`Shutdown`: each
event keeps the object exactly as the stream carries it (a dict, written back unchanged), and
``read(...)`` gives its typed view, which every reader (``report``, the Python API, ``events``'
rendering) reads through. ``to_json()`` gives the object to write, fields in schema order; an
event built without a ``time`` is stamped when it is turned into JSON. The engine writes its
events through these same classes, so each type's fields and their order are written once. The
envelope (``Event``) and the seven types every run writes are in ``events.base`` (a plain run
builds no other event class) and are re-exported here.

The classes are ``plain.Frozen`` records (keyword constructor, immutable, equality, picklable),
not dataclasses: the runner writes through them, and ``dataclasses``' import would cost every
``run`` milliseconds before the child starts.
"""

from __future__ import annotations

from ..plain import Frozen
from .base import (  # re-exported: every reader finds every type here
    ENVELOPE as ENVELOPE,
    SCHEMA_VERSION as SCHEMA_VERSION,
    CleanupFinished as CleanupFinished,
    CleanupStarted as CleanupStarted,
    Event as Event,
    MembersSnapshot as MembersSnapshot,
    ResourceSummary as ResourceSummary,
    RootExited as RootExited,
    RunStarted as RunStarted,
    RunnerExit as RunnerExit,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar

    from typing_extensions import Self


# -- the nested objects, typed once: a view of the dict an event carries ---------------------------
# Typed as the schema has them; read leniently (like the events), so a record that breaks the
# schema may hold None where it lacks a field: validate it first where that matters.
def _view(cls, value: object, **given: Any):
    """``cls`` read leniently from ``value`` (a missing key reads as None); None when ``value``
    is not an object."""
    if not isinstance(value, dict):
        return None
    # Every field is set here, so the constructor's checks are skipped: a report reads one of
    # these per member per snapshot.
    view = object.__new__(cls)
    fields = cls._fields
    view.__dict__.update(zip(fields, map(value.get, fields)), **given)
    return view


class _Nested(Frozen):
    @classmethod
    def read(cls, value: object) -> Self | None:
        """The object ``value`` read as this type; None when it is not an object."""
        return _view(cls, value)


class Command(_Nested):
    """``run_started.command``: the argv in its redaction-aware shape."""

    redacted: bool
    argv: list[str] | None
    argv_sha256: str | None
    hint: str | None


class MemberInfo(_Nested):
    """One member of ``members_snapshot.members``."""

    pid: int
    ppid: int | None
    name: str | None
    start_time: str | None


class Shutdown(_Nested):
    """``cleanup_finished.shutdown``: the graceful stop's report (null when none was tried)."""

    soft_stop_scope: str
    soft_signal: str
    members_before: int | None
    members_after: int | None
    drained_within_grace: bool | None
    escalated: bool | None
    elapsed_ms: int | None


class CapturedStream(Frozen):
    """One stream's capture as ``output_captured`` reports it: which stream, its file, every
    byte the child produced (``bytes_seen``, which the reference spells ``bytes``), what the
    file holds (``bytes_written``), the file's SHA-256, and the two flags."""

    stream: str
    path: str
    bytes_seen: int
    bytes_written: int
    sha256: str
    truncated: bool
    write_error: bool

    @classmethod
    def read(cls, stream: str, value: object) -> CapturedStream | None:
        if not isinstance(value, dict):
            return None
        return _view(cls, value, stream=stream, bytes_seen=value.get("bytes_seen", value.get("bytes")))


class UnknownEvent(Event):
    """An event type this build does not know (a newer runner's); all its fields are in ``extra``."""

    type_name: str | None = None

    @property
    def event(self) -> str | None:
        return self.type_name

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return ()


class Timeout(Event):
    name: ClassVar[str] = "timeout"
    timeout_ms: int | None = None
    grace_ms: int | None = None
    reason: str | None = None


class OutputOverflow(Event):
    name: ClassVar[str] = "output_overflow"
    stream: str | None = None
    max_bytes: int | None = None
    grace_ms: int | None = None


class Cancelled(Event):
    name: ClassVar[str] = "cancelled"
    source: str | None = None
    grace_ms: int | None = None


class Killed(Event):
    name: ClassVar[str] = "killed"
    source: str | None = None


class LimitHit(Event):
    name: ClassVar[str] = "limit_hit"
    limit: str | None = None
    detail: str | None = None


class LimitEvidence(Event):
    name: ClassVar[str] = "limit_evidence"
    memory: str | None = None
    processes: str | None = None
    cpu: str | None = None


class OutputCaptured(Event):
    name: ClassVar[str] = "output_captured"
    stdout: dict | None = None
    stderr: dict | None = None

    def captured(self, stream: str) -> CapturedStream | None:
        """The typed capture of ``stream`` (``stdout`` or ``stderr``), None when not an object."""
        return CapturedStream.read(stream, getattr(self, stream))


class SpawnFailed(Event):
    name: ClassVar[str] = "spawn_failed"
    code: int | None = None
    message: str | None = None


class ContainerFailed(Event):
    name: ClassVar[str] = "container_failed"
    phase: str | None = None
    code: int | None = None
    message: str | None = None


EVENT_TYPES: dict[str, type[Event]] = {
    cls.name: cls
    for cls in (
        RunStarted,
        MembersSnapshot,
        RootExited,
        Timeout,
        OutputOverflow,
        Cancelled,
        Killed,
        LimitHit,
        LimitEvidence,
        ResourceSummary,
        CleanupStarted,
        CleanupFinished,
        OutputCaptured,
        SpawnFailed,
        ContainerFailed,
        RunnerExit,
    )
}
ENDING_TYPES = (RootExited, Timeout, OutputOverflow, Cancelled, Killed)


def from_json(record: dict) -> Event:
    """The typed event ``record`` holds; never raises on a dict, whatever its content."""
    name = record.get("event")
    cls = EVENT_TYPES.get(name) if isinstance(name, str) else None
    # Values are taken as the record holds them, unchecked (see the module documentation).
    envelope: dict[str, Any] = {"schema_version": record.get("schema_version"), "time": record.get("time")}
    if cls is None:
        extra = {key: value for key, value in record.items() if key not in ENVELOPE}
        return UnknownEvent(type_name=name if isinstance(name, str) else None, extra=extra, **envelope)
    known = cls.field_names()
    fields: dict[str, Any] = {key: record.get(key) for key in known}
    extra = {key: value for key, value in record.items() if key not in ENVELOPE and key not in known}
    return cls(extra=extra, **envelope, **fields)
