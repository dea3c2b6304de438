"""A held stream's events in the form they travel in the service's reply (``Request.keep_stream``):
the counterpart of ``api.result.from_records``, which builds each event back from it."""

from __future__ import annotations


def travelling(gathered: list) -> list:
    """A held stream's events as they travel in the reply (``Outcome.records``, as the emitter
    gathered them): a record as it is, an event as a tuple of its type's name and its fields'
    values in the type's order, its time the one it was emitted at. No record is made here only
    for the caller to take it apart again (``api.result.from_records`` builds each event from
    its values, the event its line would give)."""
    sent: list = []
    for item in gathered:
        if type(item) is dict:
            sent.append(item)
            continue
        event, stamp = item
        fields = event.__dict__
        values = [fields[name] for name in event._fields]
        if stamp is not None:
            if not _TIME_AT:
                _TIME_AT.append(event._fields.index("time"))
            values[_TIME_AT[0]] = stamp
        sent.append((event.name, *values))
    return sent


# Where ``time`` is among an event's fields: the envelope's place, the same for every type (each
# type's fields follow the envelope's), found at the first event stamped.
_TIME_AT: list[int] = []
