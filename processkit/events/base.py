"""The envelope every event shares, and the event types every run that reaches its end writes.

``Event`` and the seven types a plain run writes (``run_started``, ``members_snapshot``,
``root_exited``, ``resource_summary``, ``cleanup_started``, ``cleanup_finished``,
``runner_exit``) live here, apart from ``events.types``, which re-exports them beside the rest
(the endings a run rarely has, the failures, the nested objects' views, the reader's
``from_json``). Why apart: every class is built when its module loads, about 0.15 M instructions
each, and a plain run needs none of the other fifteen (bench/README.md, "Start-up: fewer
classes"). The engine imports the rare ones where it writes them. ``events.types`` says what
the classes are and how they read and write.
"""

from __future__ import annotations

from ..plain import Frozen
from . import SCHEMA_VERSION

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, ClassVar


ENVELOPE = ("schema_version", "time", "event")
_KEPT = ("schema_version", "time", "extra")  # the attributes every event has besides its fields


class Event(Frozen):
    """The envelope every event shares; subclasses add their fields, in schema order."""

    name: ClassVar[str] = ""
    _written: ClassVar[tuple[str, ...]] = ()  # field_names(), computed once per type
    schema_version: int | None = SCHEMA_VERSION
    time: str | None = None
    extra: dict = {}  # never shared: each event gets its own copy

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._written = cls.field_names()

    def _values(self) -> tuple:
        return tuple(getattr(self, key) for key in self._fields if key != "extra")

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={getattr(self, key)!r}" for key in self._fields if key != "extra")
        return f"{type(self).__name__}({shown})"

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The type's own fields, in the order the schema lists them (envelope excluded)."""
        return tuple(key for key in cls._fields if key not in _KEPT)

    @property
    def event(self) -> str | None:
        """The type's name; None only for an unknown event whose record named no type."""
        return self.name

    def to_json(self, stamp: str | None = None) -> dict:
        """The object to write: envelope, fields in schema order, then any unknown fields kept.
        An event without a time is stamped ``stamp`` (when it was emitted, for an event encoded
        later: ``Emitter``), else now."""
        fields = self.__dict__
        if fields["time"] is not None:
            stamp = fields["time"]
        elif stamp is None:
            stamp = _stamp()
        record: dict[str, Any] = {"schema_version": fields["schema_version"], "time": stamp, "event": self.event}
        for key in self._written:
            record[key] = fields[key]
        if fields["extra"]:
            for key, value in fields["extra"].items():
                record.setdefault(key, value)
        return record


def _stamp() -> str:
    """Now, as events are stamped: ``emitter.utc_timestamp``, imported on the first stamp (a reader
    of events never needs the writer's modules), then kept."""
    if not _STAMPER:
        from .emitter import utc_timestamp

        _STAMPER.append(utc_timestamp)
    return _STAMPER[0]()


_STAMPER: list[Callable[[], str]] = []


def _init_event(self: Event, *args: Any, **values: Any) -> None:
    """An event built by name (the engine's call: every field has a default) in one update of its
    fields; anything else (positional fields, an unknown name) goes through ``Frozen``'s checks.
    Set after the class is made: a class body's own ``__init__`` would mark it hand-written."""
    cls = type(self)
    if args or not values.keys() <= cls._fieldset:
        Frozen.__init__(self, *args, **values)
        return
    fields = self.__dict__
    fields.update(cls._fixed)
    for key, default in cls._copied.items():
        if key not in values:
            fields[key] = type(default)(default)
    fields.update(values)


if not TYPE_CHECKING:  # the constructor type checkers see is Frozen's
    Event.__init__ = _init_event


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


class RunnerExit(Event):
    name: ClassVar[str] = "runner_exit"
    code: int | None = None
    source: str | None = None
    child_code: int | None = None
