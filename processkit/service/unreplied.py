"""A reply the runner service could not make (its pickle past the service's memory, its frame past
the 4 GiB its length field holds): the run is not thrown away. The reply goes again without the
bytes it carried, each said (``unkept``, as a capture the full scratch could not take:
``scratch.not_copied``), with the child's own code, usage and pid; only a reply that fails even so
ends the call, as a report that would not be made (111, the reference's "a report won't serialize")."""

from __future__ import annotations

from ..capture_layout import STREAMS
from ..errors import Failure, Kind
from .request import failed

# The reply's fields that hold what the run wrote, as bytes, and each one's name as the caller says it
CARRIED = {**{name: name for name in STREAMS}, "jsonl": "events"}


def reply_anyway(reply, rid: int, report: dict) -> None:
    """``reply`` the run's ``report``; one that cannot be made, again without its bytes; one that
    cannot be made even so, as the call's failure (111). ``wire.append`` never leaves half a frame."""
    try:
        reply(("done", rid, report))
        return
    except Exception as exc:  # noqa: BLE001 - its pickle's memory, a frame past 4 GiB: this call alone
        cause = _said(exc)
    try:
        reply(("done", rid, without_bytes(report, cause)))
    except Exception as exc:  # noqa: BLE001 - the last resort: a reply with nothing of the run's
        reply(("done", rid, failed(Failure(Kind.SETUP, f"its report could not be made ({cause}; then {_said(exc)})"))))


def without_bytes(report: dict, cause: str) -> dict:
    """``report`` with each field of the run's bytes set to None and said under ``unkept``."""
    why = (
        f"its reply could not be made ({cause}): more than the runner service can return; capture_max_bytes= bounds it"
    )
    kept = dict(report, unkept=list(report.get("unkept") or ()))
    for name, said in CARRIED.items():
        value = report.get(name)
        if isinstance(value, (bytes, bytearray, memoryview)):
            kept[name] = None
            kept["unkept"].append((said, len(value), why))
    return kept


def _said(exc: BaseException) -> str:
    """An exception as its full name and words (``struct.error`` prints as a bare ``error``)."""
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{name}: {exc}" if str(exc) else name
