"""A memory-backed stream's gathered events (``Emitter``'s ``fd``: a batch's job, the API's runner
service) made into records and written: at ``close`` if the stream is kept, or once they weigh
more than ``emitter.SPILL_WEIGHT``.

Apart from the emitter because a plain run never gathers: its stream is written event by event,
so it loads none of this (as ``events/backlog.py``, imported by the first use). The emitter hands
its clock's format (``stamp``: ``emitter.utc_timestamp``) and its line's encoding (``encode``):
this module, imported by it, imports nothing of it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    Stamp = Callable[[int], str]


def records(gathered: list, stamp: Stamp) -> list[dict]:
    """What was gathered as records: those made at ``emit`` as they are, the events kept with
    their stamps made now, each the record ``emit`` would have made."""
    return [item if type(item) is dict else item[0].to_json(_stamp(item[1], stamp)) for item in gathered]


def _stamp(ns: int | None, stamp: Stamp) -> str | None:
    """A gathered event's time as its record gives it: the clock read at ``emit``, formatted
    only now, for a stream that is kept (a passing ``--keep failed`` job's five dropped events
    are never given a text time); None for an event that had its own."""
    return None if ns is None else stamp(ns)


def stamped(item, stamp: Stamp):
    """A gathered item as ``Emitter.gathered`` gives it: a record as it is, an ``(event, stamp)``
    pair with the stamp as text."""
    return item if type(item) is dict else (item[0], _stamp(item[1], stamp))


def write(emitter, gathered: list, encode: Callable[[dict], bytes], stamp: Stamp) -> None:
    """The lines before any failure to encode, as a stream written line by line keeps them;
    ``remembered`` then holds only what reached the file. ``gathered``: records, and events
    with their stamps (``Emitter.emit``)."""
    lines = []
    made = records(gathered, stamp)
    try:
        for record in made:
            lines.append(encode(record) + b"\n")
    except (ValueError, TypeError) as exc:
        emitter._fail(exc)
    try:
        if lines:
            emitter._write(b"".join(lines))
    except OSError as exc:
        emitter._fail(exc)
        lines = []
    emitter.remembered.clear()
    for record in made[: len(lines)]:
        if record["event"] in emitter._remember:
            emitter.remembered[record["event"]] = record
