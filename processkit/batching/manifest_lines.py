"""A manifest's lines as its passes read them: each line that is not blank decoded (UTF-8, then
JSON, a key given twice refused), numbered as in the file, and a stream that cannot seek spooled as
it is read.

Apart from ``batching/manifest.py``, which makes each decoded value a job and checks the jobs
together: this is only how the bytes of a line become its value, the same for the check and for
the pass that starts the jobs.
"""

from __future__ import annotations

import os
import stat

from ..bounded import BOM, BadShape, loads
from ..errors import usage
from ..text import plural


def seekable(stream) -> bool:
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, AttributeError, ValueError):
        return False


def copied(numbered, spool):
    """The lines, each also written to ``spool`` as read (numbers stay those of the stream)."""
    for number, raw in numbered:
        spool.write(raw)
        yield number, raw


def numbered_values(numbered, held: int | None = None):
    """Each line that is not blank, decoded: ``(number, value, size)``, its size in bytes for
    the blocks a pass reads ahead (``blocks.in_blocks``); the one loop of the check and the pass.
    (The API's values, which have no line, come to ``_check`` with size 0.) ``held``: a pass's
    count of the jobs checked. A line past it is refused before it is decoded, since whatever it
    holds (a job half written, say) it was appended since the check; an end before it is refused
    too (the file was cut)."""
    count = 0
    for number, raw in numbered:
        raw = raw.removeprefix(BOM) if number == 1 else raw  # an editor's mark (RFC 8259 §8.1)
        if raw.strip():
            if count == held:
                raise usage(f"manifest line {number}: a job past the {held} it held")
            count += 1
            yield number, decoded(number, raw), len(raw)
    if held is not None and count < held:
        raise usage(f"it ends after {count} of its {plural(held, 'job')}")


def decoded(number: int, raw: bytes):
    """A line's JSON value. The line is decoded as UTF-8 first: ``json.loads`` given bytes would
    guess UTF-16 or UTF-32 from the first bytes, and such a line is cut at a byte 0x0a that
    belongs to a character. It is parsed without its line end, and where it is not JSON the
    parser's position is said as a column of this line: with the line feed, a value cut at the
    line's end would be said to be at `line 2 column 1`, the manifest's next line."""
    try:
        text = raw.decode("utf-8").removesuffix("\n").removesuffix("\r")  # a CRLF line's too
    except UnicodeDecodeError as exc:
        raise usage(f"manifest line {number}: not UTF-8 (byte {exc.start + 1})") from None
    try:
        return loads(text, unique_keys=True)  # a key given twice is refused, never "last wins"
    except BadShape as exc:
        raise usage(f"manifest line {number}: {exc}") from None
    except ValueError as exc:
        from json import JSONDecodeError  # loaded by ``loads`` already

        said = f"{exc.msg} at column {exc.colno}" if isinstance(exc, JSONDecodeError) else str(exc)
        raise usage(f"manifest line {number}: not JSON ({said})") from None
