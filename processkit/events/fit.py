"""An event line kept within the readers' bound (``bounded.LINE_BYTES``, 1 MiB: docs/events.md
§1): every reader of a stream (``events``, ``wait``, ``report``, the API's) skips a longer line,
so an event encoded longer would be written and then lost. Only three fields have no bound of
their own: ``run_started``'s raw argv (``--argv-raw``: up to the kernel's 2 MiB) and labels,
``members_snapshot``'s members and ``cleanup_finished``'s pids (a tree of tens of thousands).
Such an event is written with that part left out, in a shape the schema allows, and a warning
on stderr says what was left out. Imported only when a line is over the bound."""

from __future__ import annotations

from ..bounded import LINE_BYTES
from ..diagnostics import warn
from ..jsontext import dumps

# What a cut list's event says instead of the rest (docs/differences.md, "An event too long for a
# line"). The schema has no property for it: a snapshot with ``read_error`` is the reference's
# "not the tree" (so every reader counts nothing from it); ``remaining`` keeps the full count,
# so a teardown of a cut list is never read as clean, nor its hard kill as failed.
_SNAPSHOT_CUT = "read_error set: the list is not the whole tree"
_PIDS_CUT = "remaining keeps the full count"

# The longest encoded line: every reader counts the newline the emitter writes after it.
_MOST = LINE_BYTES - 1

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def fitted(record: dict, line: bytes, encode: Callable[[dict], bytes]) -> bytes:
    """``record``'s line (``line``, ``encode``'s) made at most LINE_BYTES long with its newline, and said on stderr;
    a record with nothing to leave out stays as it is, and is said too."""
    name = record.get("event")
    record = dict(record)
    command = record.get("command")
    if name == "run_started" and type(command) is dict and command.get("argv") is not None:
        record["command"] = {**command, "redacted": True, "argv": None}
        line = encode(record)
        warn(f"run_started: the raw argv would make an event line over {LINE_BYTES} bytes: written redacted "
             "(its argv_sha256 and hint only)")  # fmt: skip
    if name == "run_started" and len(line) > _MOST and record.get("labels"):
        count = len(record["labels"])
        record["labels"] = {}
        line = encode(record)
        warn(
            f"run_started: the run's {count} labels would make an event line over {LINE_BYTES} bytes: written without them"
        )
    for key, said in (("members", _SNAPSHOT_CUT), ("remaining_pids", _PIDS_CUT)):
        items = record.get(key)
        if len(line) > _MOST and type(items) is list and items:
            kept = _fitting(record, key, items, encode)
            record[key] = items[:kept]
            if key == "members":
                record["read_error"] = True
            line = encode(record)
            warn(f"{name}: {kept} of its {len(items)} {key} written, the rest would make an event line over "
                 f"{LINE_BYTES} bytes ({said})")  # fmt: skip
    if len(line) > _MOST:
        warn(f"{name}: an event line of {len(line) + 1} bytes, over the {LINE_BYTES} its readers read")
    return line


def _fitting(record: dict, key: str, items: list, encode: Callable[[dict], bytes]) -> int:
    """How many of ``items``, from the first, fit in ``record``'s line: each takes its own JSON
    text and a comma (a lone surrogate counted as the 3 bytes of the U+FFFD it is written as)."""
    room = _MOST - len(encode({**record, key: []}))
    kept = 0
    for item in items:
        room -= len(dumps(item).encode("utf-8", "surrogatepass")) + (1 if kept else 0)
        if room < 0:
            break
        kept += 1
    return kept
