"""The lines of a failed job's capture that say why it failed, with its last lines (or, where no
line says why, its first and last), and every stretch between them counted: what the batch's
closing block and its JUnit ``failure`` show of a capture too large to show whole. A pytest
shard's assertion (``E   assert ...``) sits near the head of a 2 MB capture whose tail is
captured logs; a compiler's first error comes first. nextest finds a failed test's panic
message in its output (``thread '...' panicked at``, ``Error: ``) and shows it; these are the
same kind of lines, read for the runners a batch's jobs are: pytest's (``E   ``, ``FAILED ``,
``ERROR ``, the ``___ test_x ___`` header, the failing source line ``>   ``, ``file.py:7: AssertionError``), a Python traceback,
Rust's panic and ``error[E0308]:``, Go's ``--- FAIL:`` and ``panic:``, a C compiler's
``a.c:1:2: error:``. A heuristic: a line that only looks like one of these is shown too.

Bounded: the file is read in 1 MiB pieces, the first ``SCAN_BYTES`` of it searched, at most
``SEARCH_BYTES`` of all the captures one reader shows (the closing block; the JUnit report), each
line kept at most ``LINE_BYTES`` long (cut at a character's end) and only ``FOUND_KEPT`` of them
kept; a line longer than a piece (a one-line JSON report) is searched inside for a word that says
why, a part around it kept. The last searches are remembered, so the JUnit written after the
block does not search the same capture again.
"""

from __future__ import annotations

import contextlib
import os
import re

from ..bounded import RUN_FILE, InputError, open_input
from ..events.render import size as size_words
from ..text import plural, shown_lines, whole_chars

TAIL_BYTES = 4096  # the end of a capture read for its last lines
SCAN_BYTES = 64 << 20  # of a capture searched for the lines that say why (an 8 MiB default cap: all)
SEARCH_BYTES = 256 << 20  # of all the captures one closing block, or one JUnit report, searches
FOUND_KEPT = 50  # of a capture's lines that say why, kept from its search: the most a reader shows
_SEARCHES: dict = {}  # a capture's identity -> (bytes searched, what was found): searched once
_SEARCHES_KEPT = 64
LINE_BYTES = 1024  # of a line that says why, kept
_PIECE = 1 << 20
# Words searched for inside a line longer than a piece, where no line start is: a one-line
# JSON report's ``"message": "AssertionError: ...``, a panic, a traceback past a progress line
_INSIDE = (b"Error", b"Exception", b"error", b"FAIL", b"panic", b"Traceback", b"fatal")
_EDGE = max(map(len, _INSIDE)) - 1  # the bytes of a piece searched again with the next
_BEFORE = 64  # of a long line's bytes shown before the word found in it
_START = 64 * 1024  # of a long line matched as any line's start
_HEAD_READ = 64 * 1024  # of a block read for its first lines
_SGR = rb"(?:\x1b\[[0-9;:]*m)*"  # a coloured line (pytest --color=yes, a --pty job) says why too
# Each run a branch reads is taken whole and never given back a byte at a time (a lookahead's
# group, then its backreference: Python 3.10 has no possessive form), and a line's first token is
# read once for the branches that begin with it: the search is linear in a line's length.
_LINE_START = rb"\n(?=(" + _SGR + rb"))\1"
_LEADS = (  # the lines that say why by their first word
    rb"(?=[EF>_Ttepf-])(?:E(?=   |\r?$)|>(?= {3})|(?:FAILED|ERROR)"
    + _SGR  # pytest's coloured short summary: ESC[31mFAILED ESC[0m test_x.py::...
    + rb" |_{3,} .* _{3,}"
    + _SGR
    + rb"\r?$|Traceback \(most recent call last\)|thread '[^'\n]*' (?:\(\d+\) )?panicked at "
    rb"|Error: |error(?:\[E\d+\])?: |--- FAIL: |panic: |fatal: )"
)
# a location, or a dotted name, its first token followed by a colon (its first byte no ESC: the
# line's colour sequences are the group's); each holds one of ``_TOKEN_WORDS``
_TOKENS = (
    rb"(?=([^\s:\x1b][^\s:]*))(?=\2:)"
    rb"(?:\2:\d+(?:: (?=(\w*))\3(?:(?<=Error)|(?<=Exception)|(?<=Failed))|(?::\d+)?: (?:fatal )?error: )"
    rb"|(?=((?:\w+\.)*))\4\w+(?:Error|Exception):)"
)
_TOKEN_WORDS = (b"rror", b"Exception", b"Failed")
_WHY = re.compile(_LINE_START + rb"(?:" + _LEADS + rb"|" + _TOKENS + rb")", re.M)
# a piece none of whose lines holds a token word: its first tokens not read (short lines, at most
# a tenth of the time)
_WHY_LEADS = re.compile(_LINE_START + _LEADS, re.M)

# One item of what is shown: (line number, its text as a terminal shows it), or the count of
# lines between two shown ones that are not shown (an int), or None: the rest of a file too
# large to count, not shown.
Item = "tuple[int | None, str] | int | None"


class Shown:
    """What of a capture is shown: ``items`` in file order; ``why`` lines said why (shown),
    ``more`` others did but are not shown; ``head``: the first lines are shown (no line said
    why); ``tail``: how many last lines; ``whole``: nothing left out but blank lines; ``size``
    its bytes."""

    __slots__ = ("items", "why", "more", "head", "tail", "whole", "size", "searched")

    def __init__(
        self, items: list, why: int, more: int, head: int, tail: int, whole: bool, size: int, searched: int
    ) -> None:
        self.items, self.why, self.more, self.head = items, why, more, head
        self.tail, self.whole, self.size, self.searched = tail, whole, size, searched

    def said(self) -> str:
        """What is shown, in words (``said_words``)."""
        return said_words(self.why, self.more, self.head, self.tail)

    def gap(self, item: int | None) -> str:
        """A stretch not shown, in words: ``39999 lines not shown``; one not counted, past the
        bytes searched."""
        if item is not None:
            return not_shown(item)
        if self.searched:
            return f"the rest, past its first {size_words(self.searched)} searched (not counted), not shown"
        return f"the rest (not searched: the {size_words(SEARCH_BYTES)} to search was spent), not shown"


def said_words(why: int, more: int, head: int, tail: int, searched: int = 0) -> str:
    """What is shown, in words: ``its 8 line(s) that say why and its last 5 line(s)``, ``its
    first 10 of 31 lines that say why ...`` (``more`` said why, not shown), ``its first 5 and
    last 5 line(s)`` (``head``: no line said why); no last line where the one the tail would
    begin with is shown as a line that says why. ``searched``: the bytes the lines that say why
    were counted in, where the file is larger."""
    last = f"last {tail} line(s)"
    if why:
        said = f"{why} line(s)" if not more else f"first {why} of {why + more} lines"
        if searched:
            said += f" that say why, its first {size_words(searched)} searched (not counted past it)"
            return f"its {said}" + (f", and its {last}" if tail else "")
        return f"its {said} that say why" + (f" and its {last}" if tail else "")
    return f"its first {head} and {last}" if head else f"its {last}"


def not_shown(count: int) -> str:
    """A stretch of ``count`` lines left out, in words."""
    return f"{plural(count, 'line')} not shown"


def opened(path: str):
    """A capture file open for reading (``bounded.open_input``'s rules: a regular file, never
    waited on), or None where it cannot be opened so."""
    try:
        return os.fdopen(open_input(path, RUN_FILE), "rb")
    except (OSError, InputError):
        return None


def shown(path: str, most: int, tail_lines: int | None, searched: list[int], head_lines: int = 5) -> Shown | None:
    """What of the capture at ``path`` to show: its last ``tail_lines`` lines with text (all
    those of its last ``TAIL_BYTES`` when None); where that is not the whole file, before them
    the first ``most`` lines that say why, or, where none does, its first ``head_lines``. The
    bytes searched come off ``searched`` (what is left of ``SEARCH_BYTES``); a capture searched
    already (the closing block's, then the JUnit's) is not searched again. None: it cannot be
    opened as a regular file (read without waiting)."""
    handle = opened(path)
    if handle is None:
        return None
    try:
        with handle:
            found = os.fstat(handle.fileno())
            size = found.st_size
            handle.seek(max(0, size - TAIL_BYTES))
            ends = _lines(handle.read(TAIL_BYTES), size > TAIL_BYTES)
            tail = _last(ends, tail_lines, size > TAIL_BYTES)
            if size <= TAIL_BYTES and len(tail) == len([item for item in ends if item[1].strip()]):
                return Shown([(None, text) for _, text in tail], 0, 0, 0, len(tail), True, size, size)
            # the change time too: a file rewritten to the same size, its mtime set back, is another
            key = (found.st_dev, found.st_ino, size, found.st_mtime_ns, found.st_ctime_ns)
            limit, scan = _SEARCHES.get(key, (-1, None))
            if scan is None or limit < min(size, SCAN_BYTES, searched[0]):
                limit = max(0, min(size, SCAN_BYTES, searched[0]))
                handle.seek(0)
                scan = _scan(handle, limit, size, FOUND_KEPT, head_lines)
                searched[0] -= limit
                # the oldest let go of: an API caller's threads share these, and another's forgetting
                # it (or emptying them) meanwhile is no error
                with contextlib.suppress(StopIteration, RuntimeError):
                    if len(_SEARCHES) >= _SEARCHES_KEPT:
                        _SEARCHES.pop(next(iter(_SEARCHES)), None)
                _SEARCHES[key] = (limit, scan)
    except OSError:  # a read that fails (EIO, a lost mount): as a file not opened
        return None
    lines, why_found, total, head, cut = scan
    known = size <= limit  # the tail's lines numbered: the file's last ones
    numbered = [(lines + index if known else None, text) for index, text in tail]
    first = numbered[0][0] if numbered else None
    partial = size > TAIL_BYTES and bool(tail) and tail[0][0] == ends[0][0]  # the read's cut line
    # before the tail, or in the line whose end the tail begins with (a one-line report): the part that says why too
    why = [item for item in why_found[:most] if first is None or item[0] < first + partial]
    if partial and why and why[-1][0] == first:  # that line is shown once, as a line that says why
        numbered = [item for item in numbered if item[0] != first]
    before = why or [item for item in head if first is None or item[0] < first]  # none says why: the head
    said = _said_why(text for _, text in numbered) if known else 0
    items = _with_gaps([*([item] for item in why), before if not why else [], numbered], lines if known else None)
    whole = not partial and not cut and not any(isinstance(item, int) or item is None for item in items)
    more = max(0, total - len(why) - said) if why else 0
    return Shown(items, len(why), more, 0 if why else len(before), len(numbered), whole, size, limit)


def before_tail(handle, size: int, before: int, tail: list[str]) -> tuple[list, str]:
    """For a page that shows a failed run's last lines (``tail``, after its first ``before``
    lines), the open capture's (of ``size`` bytes, its first ``SCAN_BYTES`` searched): the first
    ``FOUND_KEPT`` lines before them that say why, each numbered from 1, with the count of lines
    between and after them (``_with_gaps``' items; none where no line before them says why),
    and what is shown in words (``said_words``: the lines found that are not shown counted; in a
    capture larger than the part searched, the tail's lines were never counted, and the words
    say the count stops there)."""
    handle.seek(0)
    _, found, total, _, _ = _scan(handle, min(size, SCAN_BYTES), size, FOUND_KEPT, 0)
    why = [item for item in found if item[0] <= before]
    count = len({number for number, _ in why})  # a line shown in pieces is one
    items = _with_gaps([*([item] for item in why), []], before) if why else []
    whole = size <= SCAN_BYTES  # else the tail lies past the part searched: never in ``total``
    more = max(0, total - count - (_said_why(tail) if whole else 0)) if count else 0
    return items, said_words(count, more, 0, len(tail), 0 if whole else SCAN_BYTES)


def _said_why(texts) -> int:
    """How many of the lines (``texts``, each without its line feed) say why."""
    return sum(1 for text in texts if _WHY.match(b"\n" + text.encode("utf-8", "replace")))


def _with_gaps(segments: list, lines: int | None) -> list:
    """The segments' lines in file order (each segment's lines one run of the file, its blank
    lines aside), with the count of lines between two segments, not shown, between them; None
    where a file too large to count leaves that unknown."""
    items: list = []
    at: int | None = 0  # the number of the last line shown
    for segment in segments:
        if not segment:
            continue
        number = segment[0][0]
        if number is None:
            if at is not None:
                items.append(None)
        elif at is not None and number > at + 1:
            items.append(number - at - 1)
        items.extend(segment)
        at = segment[-1][0]
    if not segments[-1] and at is not None and lines is not None and lines > at:
        items.append(lines - at)  # no last line with text: what follows is counted
    return items


def _lines(data: bytes, cut: bool) -> list[tuple[int, str]]:
    """``data``'s lines as shown, each with its line's index from the end of ``data`` (0 the
    last); the first, when ``cut`` (the read began inside it), marked as a part."""
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    out: list[tuple[int, str]] = []
    for index, line in enumerate(raw):
        for piece in shown_lines(whole_chars(line, cut and index == 0).decode("utf-8", "replace")):
            out.append((index - len(raw) + 1, "..." + piece if cut and index == 0 and piece.strip() else piece))
    return out


def _last(lines: list[tuple[int, str]], count: int | None, cut: bool) -> list[tuple[int, str]]:
    """The last ``count`` lines with text (all when None); the first line, when ``cut`` (the
    read began inside it), only where fewer than ``count`` others (or none) follow it."""
    kept = [item for item in lines if item[1].strip()]
    if cut and kept and kept[0][0] == lines[0][0] and len(kept) > 1 and (count is None or len(kept) > count):
        kept = kept[1:]
    return kept if count is None else kept[-count:]


def _scan(handle, limit: int, size: int, most: int, head_lines: int) -> tuple[int, list, int, list, bool]:
    """One pass over the file's first ``limit`` bytes (of its ``size``): its lines (counted as
    ``wc -l`` does, a last line without a line feed too), the first ``most`` lines that say why
    (numbered from 1; a line longer than a piece as ``_Long`` finds it), how many did, its first
    ``head_lines`` lines with text, and whether a line of these was cut (kept in part)."""
    lines = total = read = 0
    cut = False
    found: list[tuple[int, str]] = []
    head: list[tuple[int, str]] = []
    carry = b""
    long: _Long | None = None  # a line longer than a piece, read on to its end
    while True:
        piece = handle.read(min(_PIECE, limit - read)) if read < limit else b""
        read += len(piece)
        if long is not None:
            end = piece.find(b"\n")
            long.more(piece if end < 0 else piece[:end])
            if end < 0 and piece:
                continue
            said = long.said(end >= 0 or read >= size)
            total, lines, cut, long = total + bool(said), lines + 1, cut or bool(said), None
            found.extend(said if len(found) < most else ())
            if end >= 0:  # the rest of the piece: lines as any
                piece = piece[end + 1 :]
                if not piece:
                    continue
        data = carry + piece
        split = data.rfind(b"\n") + 1 if piece else len(data)  # the last piece: its last line too
        block, carry = data[:split], data[split:]
        if len(head) < head_lines:
            cut = _first(block, lines, head, head_lines) or cut
        at = counted = 0
        begin = block.find(b"\n") + 1  # past the first line where it is longer than a piece (in the
        if begin > _PIECE + 1:  # block whole, begun in the carry): read as one read on, not by its start
            said = _Long(lines + 1, block[: begin - 1]).said(True)
            total, cut = total + bool(said), cut or bool(said)
            found.extend(said if len(found) < most else ())
        else:
            begin = 0
        why = _WHY if any(word in block for word in _TOKEN_WORDS) else _WHY_LEADS
        for match in why.finditer(b"\n" + block, begin):
            total += 1
            if len(found) < most:
                start = match.start()
                counted += block.count(b"\n", at, start)
                at = start
                stop = block.find(b"\n", start)
                line = block[start : stop if stop >= 0 else len(block)]
                text, cut_here = _kept_text(line)
                cut = cut or cut_here
                found.extend((lines + counted + 1, piece) for piece in shown_lines(text) if piece.strip())
        lines += block.count(b"\n")
        if len(carry) > _PIECE:  # a line longer than a piece: its start now, its rest as it is read
            if len(head) < head_lines:
                cut = _first(carry[: LINE_BYTES + 4], lines, head, head_lines, ended=False) or cut
            long, carry = _Long(lines + 1, carry), b""
        if not piece:
            return lines + (1 if block and not block.endswith(b"\n") else 0), found[:most], total, head, cut


class _Long:
    """A line longer than a piece (a test runner's one-line JSON report, a huge assertion): its
    start matched as any line's; where that does not say why, its bytes searched for a word
    that does (``_INSIDE``, the first found), and a part of it around that word kept: what is
    shown says how much of the line was cut before and after it."""

    __slots__ = ("number", "size", "at", "kept", "edge", "hit")

    def __init__(self, number: int, start: bytes) -> None:
        self.number, self.size, self.edge, self.hit, self.kept = number, 0, b"", 0, b""
        self.at = 0 if _WHY.match(b"\n" + start[:_START]) else -1
        self.more(start)

    def more(self, data: bytes) -> None:
        """The line's next bytes, searched while nothing in it has said why: one ``find`` a word;
        then the part's first ``LINE_BYTES`` kept, from the pieces that follow too."""
        if self.at < 0:
            seen = self.edge + data  # a word across two pieces; the bytes before one at a piece's start
            hits = [at for at in (seen.find(word) for word in _INSIDE) if at >= 0]
            if hits:  # from a character's start: the count cut holds the bytes of one cut
                begin = max(0, min(hits) - _BEFORE)
                part = whole_chars(seen[begin : begin + LINE_BYTES], head_cut=True)
                begin += min(LINE_BYTES, len(seen) - begin) - len(part)
                self.at, self.kept, self.hit = self.size - len(self.edge) + begin, part, min(hits) - begin
            self.edge = seen[-(_BEFORE + _EDGE) :]
        elif len(self.kept) < LINE_BYTES:
            self.kept += data[: LINE_BYTES - len(self.kept)]
        self.size += len(data)

    def said(self, ended: bool) -> list[tuple[int, str]]:
        """The part kept, as shown, with what was cut before and after it; ``ended``: the line's
        end was read (else the search's bound cut it). Of a part redrawn by carriage returns (a
        progress line's), the piece between two that holds the word found: one line, whatever
        redraws the part's other pieces were (the terminal's last is not in the part)."""
        if self.at < 0:
            return []
        start = self.kept.rfind(b"\r", 0, self.hit) + 1
        end = self.kept.find(b"\r", self.hit)
        part = self.kept[start:end] if end >= 0 else whole_chars(self.kept[start:], tail_cut=True)  # to one's end
        at, left = self.at + start, self.size - self.at - start - len(part)
        text = " ".join(shown_lines(part.decode("utf-8", "replace")))  # no line feed, no carriage return: one
        before = f"[{size_words(at)} of this line cut] " if at else ""
        after = (
            (f" [{size_words(left)} more of it cut]" if ended else " [the rest of it, not searched, cut]")
            if left
            else ""
        )
        return [(self.number, before + text + after)] if text.strip() else []


def _kept_text(line: bytes, whole: bool = True) -> tuple[str, bool]:
    """A line as shown: its first ``LINE_BYTES``, a character the cut split left out, and the
    cut said after them (``whole``: ``line`` is all of it, so its bytes cut are counted), as a
    longer line's part says it: a cut line never reads as the whole line; and whether it was
    cut. A whole line's closing carriage return (every line of a ``--pty`` job's) is no byte
    of it, so neither cuts it nor is counted."""
    if whole and line.endswith(b"\r"):
        line = line[:-1]
    kept = whole_chars(line[:LINE_BYTES], tail_cut=len(line) > LINE_BYTES)
    text = kept.decode("utf-8", "replace")
    if len(line) <= LINE_BYTES:
        return text, False
    return text + (f" [{size_words(len(line) - len(kept))} more of it cut]" if whole else " [the rest of it cut]"), True


def _first(block: bytes, lines: int, head: list, count: int, ended: bool = True) -> bool:
    """The block's first lines with text, up to ``count`` in ``head``, numbered after ``lines``;
    True where one kept is cut (longer than ``LINE_BYTES``). ``ended``: the block's last line
    ends in it (else only its start was given)."""
    cut = False
    split = block[:_HEAD_READ].split(b"\n")
    for index, line in enumerate(split):
        text, cut_here = _kept_text(line, ended and len(block) <= _HEAD_READ or index < len(split) - 1)
        for piece in shown_lines(text):
            if len(head) >= count:
                return cut
            if piece.strip():
                head.append((lines + index + 1, piece))
                cut = cut or cut_here
    return cut
