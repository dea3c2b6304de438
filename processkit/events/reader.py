"""Reading a JSONL event stream back as untrusted bytes: complete lines only, each bounded, every
defect described instead of raised.

A line is handed out once its newline has arrived (a reader racing the writer never sees half
an event); what a writer left unterminated is handed out only at the very end. A line over
MAX_LINE_BYTES is reported once and the rest of it discarded, so a file without newlines cannot
decide this process's memory use. Invalid UTF-8 is replaced and reported, as the reference's
contract says: the value is read from the text with U+FFFD (``String::from_utf8_lossy``), the
bytes stay as found (``--json`` passes them through byte for byte), and ``replaced`` says where
the first bad byte was, for the reader's caller to report.
"""

from __future__ import annotations

from ..bounded import LINE_BYTES, BadShape, loads
from ..plain import Frozen

MAX_LINE_BYTES = LINE_BYTES
ECHO_BYTES = 256


class Line(Frozen):
    """One non-blank line: its 1-based number in the file, its bytes as found (without the
    newline; an over-long line's first ECHO_BYTES), the parsed value, why it cannot be read as
    JSON (None when it can), and the 1-based byte of its first invalid UTF-8 (0: none; the value
    and ``text`` have U+FFFD there). Its own ``__init__``: a reader makes one per line, and this
    one costs half of the generic constructor."""

    __slots__ = ("number", "raw", "value", "problem", "replaced")
    number: int
    raw: bytes
    value: object
    problem: str | None
    replaced: int

    def __init__(self, number: int, raw: bytes, value: object = None, problem: str | None = None, replaced: int = 0):
        init = object.__setattr__
        init(self, "number", number)
        init(self, "raw", raw)
        init(self, "value", value)
        init(self, "problem", problem)
        init(self, "replaced", replaced)

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace")

    @property
    def event(self) -> dict | None:
        """The line as an event object, or None when it is not a JSON object."""
        return self.value if self.problem is None and isinstance(self.value, dict) else None


def parse(number: int, raw: bytes) -> Line:
    """One line read as the reference reads it: bytes that are not UTF-8 become U+FFFD
    (``String::from_utf8_lossy``) in the text the value is read from; the bytes are kept."""
    replaced = 0
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", "replace")
        replaced = exc.start + 1
    try:
        value = loads(text)  # NaN and Infinity are no JSON values; nested at most bounded.MAX_DEPTH
    except BadShape as exc:
        return Line(number, raw, problem=str(exc), replaced=replaced)
    except ValueError as exc:
        return Line(number, raw, problem=f"not valid JSON ({exc})", replaced=replaced)
    return Line(number, raw, value, replaced=replaced)


class LineSplitter:
    """Turns the bytes of one stream, fed in any chunking, into Lines."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._number = 0
        self._skipping = False  # inside an over-long line that was already reported

    def feed(self, data: bytes) -> list[Line]:
        self._pending += data
        lines = []
        start = 0
        while True:
            end = self._pending.find(b"\n", start)
            if end < 0:
                break
            if self._skipping:
                self._skipping = False
            elif end - start > MAX_LINE_BYTES:
                lines.append(self._overlong(self._pending[start : start + ECHO_BYTES]))
            else:
                lines += self._line(bytes(self._pending[start:end]))
            start = end + 1
        del self._pending[:start]
        if len(self._pending) > MAX_LINE_BYTES:
            if not self._skipping:
                self._skipping = True
                lines.append(self._overlong(self._pending[:ECHO_BYTES]))
            self._pending.clear()
        return lines

    def skip(self, count: int) -> list[Line]:
        """``count`` NUL bytes passed over unread (a sparse file's hole), as ``feed`` would take
        them, without holding them: none is a newline, so past a line's limit they are skipped."""
        if self._skipping or count <= 0:
            return []
        if len(self._pending) + count <= MAX_LINE_BYTES:
            self._pending += bytes(count)
            return []
        head = bytes(self._pending[:ECHO_BYTES]) + bytes(min(count, max(0, ECHO_BYTES - len(self._pending))))
        self._pending.clear()
        self._skipping = True
        return [self._overlong(head)]

    def end(self) -> list[Line]:
        """The unterminated tail a writer left behind, once nothing more can arrive."""
        raw, skipping = bytes(self._pending), self._skipping
        self._pending.clear()
        self._skipping = False
        return [] if skipping else self._line(raw)

    def _overlong(self, head) -> Line:
        self._number += 1
        return Line(self._number, bytes(head), problem=f"line exceeds the {MAX_LINE_BYTES}-byte limit and was skipped")

    def _line(self, raw: bytes) -> list[Line]:
        self._number += 1
        if not raw.strip():
            return []  # blank lines keep their number, so reports match an editor's
        return [parse(self._number, raw)]
