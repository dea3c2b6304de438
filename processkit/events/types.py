"""One class per event type of schema version 1: read from a JSONL object, and built to be written.

Readers must survive newer runners, so parsing is lenient: a field this build does not know is
kept in ``extra`` (and written back after the known ones), a known field that is missing reads
as None, and an event type this build does not know becomes an :class:`UnknownEvent` holding
the whole object. Nothing here validates values: ``events.validate`` does that.

Nested objects (``command``, members, a captured stream, ``shutdown``) stay plain dicts, exactly
as the stream carries them. ``to_json()`` gives the object to write, fields in schema order; an
event built without a ``time`` is stamped when it is turned into JSON.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

SCHEMA_VERSION = 1
ENVELOPE = ("schema_version", "time", "event")
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Event:
    """The envelope every event shares; subclasses add their fields, in schema order."""

    name: ClassVar[str] = ""
    schema_version: int = SCHEMA_VERSION
    time: str | None = None
    extra: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The type's own fields, in the order the schema lists them (envelope excluded)."""
        names = _FIELD_NAMES.get(cls)
        if names is None:
            names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("schema_version", "time", "extra"))
        return names

    @property
    def event(self) -> str | None:
        """The type's name; None only for an unknown event whose record named no type."""
        return self.name

    def to_json(self) -> dict:
        """The object to write: envelope, fields in schema order, then any unknown fields kept."""
        stamp = self.time
        if stamp is None:
            from .emitter import utc_timestamp

            stamp = utc_timestamp()
        record: dict[str, Any] = {"schema_version": self.schema_version, "time": stamp, "event": self.event}
        for key in self.field_names():
            record[key] = getattr(self, key)
        for key, value in self.extra.items():
            record.setdefault(key, value)
        return record


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnknownEvent(Event):
    """An event type this build does not know (a newer runner's); all its fields are in ``extra``."""

    type_name: str | None = None

    @property
    def event(self) -> str | None:
        return self.type_name

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    name: ClassVar[str] = "run_started"
    run_id: str | None = None
    labels: dict | None = None
    root_pid: int | None = None
    mechanism: str | None = None
    abrupt_cleanup: str | None = None
    cwd: str | None = None
    command: dict | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class MembersSnapshot(Event):
    name: ClassVar[str] = "members_snapshot"
    reason: str | None = None
    read_error: bool | None = None
    members: list | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RootExited(Event):
    name: ClassVar[str] = "root_exited"
    outcome: str | None = None
    code: int | None = None
    signal: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timeout(Event):
    name: ClassVar[str] = "timeout"
    timeout_ms: int | None = None
    grace_ms: int | None = None
    reason: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutputOverflow(Event):
    name: ClassVar[str] = "output_overflow"
    stream: str | None = None
    max_bytes: int | None = None
    grace_ms: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cancelled(Event):
    name: ClassVar[str] = "cancelled"
    source: str | None = None
    grace_ms: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Killed(Event):
    name: ClassVar[str] = "killed"
    source: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class LimitHit(Event):
    name: ClassVar[str] = "limit_hit"
    limit: str | None = None
    detail: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class LimitEvidence(Event):
    name: ClassVar[str] = "limit_evidence"
    memory: str | None = None
    processes: str | None = None
    cpu: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceSummary(Event):
    name: ClassVar[str] = "resource_summary"
    read_error: bool | None = None
    peak_memory_bytes: int | None = None
    total_cpu_ms: int | None = None
    io_read_bytes: int | None = None
    io_write_bytes: int | None = None
    peak_process_count: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CleanupStarted(Event):
    name: ClassVar[str] = "cleanup_started"
    members_before: int | None = None
    read_error: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CleanupFinished(Event):
    name: ClassVar[str] = "cleanup_finished"
    remaining: int | None = None
    remaining_pids: list | None = None
    soft_terminate: str | None = None
    shutdown: dict | None = None
    read_error: bool | None = None
    kill_error: bool | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutputCaptured(Event):
    name: ClassVar[str] = "output_captured"
    stdout: dict | None = None
    stderr: dict | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpawnFailed(Event):
    name: ClassVar[str] = "spawn_failed"
    code: int | None = None
    message: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ContainerFailed(Event):
    name: ClassVar[str] = "container_failed"
    phase: str | None = None
    code: int | None = None
    message: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunnerExit(Event):
    name: ClassVar[str] = "runner_exit"
    code: int | None = None
    source: str | None = None
    child_code: int | None = None


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
