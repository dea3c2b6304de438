"""The JSONL lifecycle writer: one compact line per event, written and flushed as it happens.

A write failure is reported once on stderr and then poisons the emitter: later events are
dropped, the run and its exit code carry on (docs/events.md §1). A JSONL that is a pipe or a FIFO
is written without blocking: a reader that takes nothing for STALL_SECONDS counts as a failed
write, so a stalled reader can delay the run, never hang it.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import time

from ..diagnostics import warn
from ..jsontext import dumps
from ..safepath import open_for_writing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

STALL_SECONDS = 2.0


def utc_timestamp(ns: int | None = None, digits: int = 3) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` with milliseconds truncated (``digits`` 6: microseconds);
    pre-epoch clocks clamp to 0."""
    ns = max(0, time.time_ns() if ns is None else ns)
    seconds, rest = divmod(ns, 1_000_000_000)
    if seconds != _SECOND[0]:  # a run's events mostly share their second: formatted once
        _SECOND[:] = [seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))]
    return f"{_SECOND[1]}.{rest // 10 ** (9 - digits):0{digits}d}Z"


_SECOND: list = [-1, ""]  # the last second formatted, and its text


def encode(record: dict) -> bytes:
    """One compact line of UTF-8. Text decoded from OS bytes (a path) is rendered lossily, as the
    reference does: each undecodable byte becomes U+FFFD instead of invalidating the line."""
    text = dumps(record)
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace").encode("utf-8")


if TYPE_CHECKING:

    class Written(Protocol):
        """An event as the emitter takes it: ``events.types.Event`` (not imported here, since
        ``types`` stamps its events with ``utc_timestamp`` from this module)."""

        def to_json(self) -> dict: ...


class Emitter:
    def __init__(self, path: str, keep: tuple[str, ...] = (), fd: int | None = None):
        """Create or truncate ``path``, never through a path another user controls
        (``safepath``); raises OSError when it cannot be opened. ``keep``: the event types whose
        last event written whole stays in ``kept``, as the object written (a batch's line, without reading the file back).
        A stream to ``os.devnull`` that keeps nothing (each of ``bench``'s runs) is not opened,
        and its events are dropped before they are formatted: nothing could read them. ``fd``: an
        open file to write instead (a batch's memory-backed stream), closed here."""
        self._poisoned = fd is None and path == os.devnull and not keep
        self.failure: str | None = None  # why writing stopped, once it has
        self._keep = keep
        self.kept: dict[str, dict] = {}
        self._fd = -1
        if self._poisoned:
            return
        self._fd = open_for_writing(path) if fd is None else fd
        if not stat.S_ISREG(os.fstat(self._fd).st_mode):
            os.set_blocking(self._fd, False)  # opened by path: the description is ours alone

    def emit(self, event: Written) -> None:
        """Write one event (a ``processkit.events.types`` instance), stamped now if it has no time."""
        if self._poisoned:
            return
        record = event.to_json()
        try:
            data = encode(record) + b"\n"
            line = memoryview(data)
            while line:
                try:
                    line = line[os.write(self._fd, line) :]
                except BlockingIOError:
                    if not select.select([], [self._fd], [], STALL_SECONDS)[1]:
                        raise OSError(errno.ETIMEDOUT, f"its reader took nothing for {STALL_SECONDS:g}s") from None
            if record["event"] in self._keep:
                self.kept[record["event"]] = record
        except (OSError, ValueError, TypeError) as exc:
            self._poisoned = True
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.failure = reason
            warn(f"JSONL event logging disabled: {reason}")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
