"""One class per event type of schema version 1: read from a JSONL object, and built to be written.

Readers must survive newer runners, so parsing is lenient: a field this build does not know is
kept in ``extra`` (and written back after the known ones), a known field that is missing reads
as None, and an event type this build does not know becomes an :class:`UnknownEvent` holding
the whole object. Nothing here validates values: ``events.validate`` does that.

Nested objects (``command``, members, a captured stream, ``shutdown``) stay plain dicts, exactly
as the stream carries them. ``to_json()`` gives the object to write, fields in schema order; an
event built without a ``time`` is stamped when it is turned into JSON. The engine writes its
events through these same classes, so each type's fields and their order are written once, here.

Built without ``dataclasses``: its import (inspect, ast, dis, tokenize) and the code it generates
per class would cost every ``run`` several milliseconds before the child starts. A small
metaclass gives the same: keyword-only constructor, frozen, ``__slots__``, equality, picklable;
``dataclass_transform`` tells type checkers so, and they check every constructor call.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar

    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_):
        return lambda cls: cls


SCHEMA_VERSION = 1
ENVELOPE = ("schema_version", "time", "event")
_KEPT = ("schema_version", "time", "extra")  # the attributes every event has besides its fields


@dataclass_transform(kw_only_default=True, frozen_default=True)
class _EventType(type):
    """Turns a class's annotated attributes into slots, in the order they are written; each
    class keeps ``_attributes``, its own and its bases', the order ``to_json`` follows."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]):
        own = tuple(
            key for key, note in namespace.get("__annotations__", {}).items() if not str(note).startswith("ClassVar")
        )
        for key in own:
            namespace.pop(key, None)  # a default: every field defaults to None, read by __init__
        namespace["__slots__"] = own
        cls = super().__new__(mcs, name, bases, namespace)
        inherited: tuple[str, ...] = sum((getattr(base, "_attributes", ()) for base in bases), ())
        cls._attributes = inherited + own  # type: ignore[attr-defined]
        return cls


def _restore(cls: type[Event], values: dict[str, Any]) -> Event:
    return cls(**values)


class Event(metaclass=_EventType):
    """The envelope every event shares; subclasses add their fields, in schema order."""

    name: ClassVar[str] = ""
    _attributes: ClassVar[tuple[str, ...]]
    schema_version: int = SCHEMA_VERSION
    time: str | None = None
    extra: dict = {}  # never shared: the metaclass drops defaults, and __init__ gives each event its own dict

    if not TYPE_CHECKING:  # type checkers see the constructor dataclass_transform describes

        def __init__(self, **values: Any) -> None:
            cls = type(self)
            init = object.__setattr__
            init(self, "schema_version", values.pop("schema_version", SCHEMA_VERSION))
            init(self, "extra", dict(values.pop("extra", None) or {}))
            for key in cls._attributes:
                if key not in ("schema_version", "extra"):
                    init(self, key, values.pop(key, None))
            if values:
                raise TypeError(f"{cls.__name__} has no field {', '.join(map(repr, values))}")

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {key!r}")

    def _compared(self) -> tuple:
        return tuple(getattr(self, key) for key in self._attributes if key != "extra")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and type(other) is type(self) and self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash((type(self), self._compared()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={getattr(self, key)!r}" for key in self._attributes if key != "extra")
        return f"{type(self).__name__}({shown})"

    def __reduce__(self):
        return _restore, (type(self), {key: getattr(self, key) for key in self._attributes})

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The type's own fields, in the order the schema lists them (envelope excluded)."""
        return tuple(key for key in cls._attributes if key not in _KEPT)

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


class UnknownEvent(Event):
    """An event type this build does not know (a newer runner's); all its fields are in ``extra``."""

    type_name: str | None = None

    @property
    def event(self) -> str | None:
        return self.type_name

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return ()


class RunStarted(Event):
    name: ClassVar[str] = "run_started"
    run_id: str | None = None
    labels: dict | None = None
    root_pid: int | None = None
    mechanism: str | None = None
    abrupt_cleanup: str | None = None
    cwd: str | None = None
    command: dict | None = None


class MembersSnapshot(Event):
    name: ClassVar[str] = "members_snapshot"
    reason: str | None = None
    read_error: bool | None = None
    members: list | None = None


class RootExited(Event):
    name: ClassVar[str] = "root_exited"
    outcome: str | None = None
    code: int | None = None
    signal: int | None = None


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


class ResourceSummary(Event):
    name: ClassVar[str] = "resource_summary"
    read_error: bool | None = None
    peak_memory_bytes: int | None = None
    total_cpu_ms: int | None = None
    io_read_bytes: int | None = None
    io_write_bytes: int | None = None
    peak_process_count: int | None = None


class CleanupStarted(Event):
    name: ClassVar[str] = "cleanup_started"
    members_before: int | None = None
    read_error: bool | None = None


class CleanupFinished(Event):
    name: ClassVar[str] = "cleanup_finished"
    remaining: int | None = None
    remaining_pids: list | None = None
    soft_terminate: str | None = None
    shutdown: dict | None = None
    read_error: bool | None = None
    kill_error: bool | None = None


class OutputCaptured(Event):
    name: ClassVar[str] = "output_captured"
    stdout: dict | None = None
    stderr: dict | None = None


class SpawnFailed(Event):
    name: ClassVar[str] = "spawn_failed"
    code: int | None = None
    message: str | None = None


class ContainerFailed(Event):
    name: ClassVar[str] = "container_failed"
    phase: str | None = None
    code: int | None = None
    message: str | None = None


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
