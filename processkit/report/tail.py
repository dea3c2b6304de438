"""The last lines of a capture file as HTML (terminal colours become coloured spans, and no
raw escape reaches the page), and whether the file still holds what the run recorded.

Facts about what captures hold: a ``--pty`` capture keeps what the child wrote to its
terminal, so SGR colour sequences (``ESC [ ... m``), cursor and erase sequences (``ESC [ K``),
links and titles (OSC: ``ESC ] 8 ;; URL ESC \\``), carriage returns (progress bars redraw a line)
and CRLF line ends. SGR becomes colour (ansi2html, which also escapes the text); every other
escape sequence is dropped, as the closing block and the JUnit drop them (``text.as_shown``),
and a line redrawn by carriage returns shows the pieces a CI log shows (``as_shown``); any other control
character (BEL, a stray ESC) is written out as an escape. A file keeps
the stream's head, its tail, or both ends (``--capture-keep``): the stream ranges it holds say
where bytes were dropped, before the file, after it, or at a point inside it where the page
marks the gap.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re

from markupsafe import Markup

from ..bounded import RUN_FILE, InputError
from ..capture_layout import FILE_NAMES
from ..events.dropped import dropped_note, gaps
from ..events.render import size as size_words
from ..events.types import CapturedStream
from ..text import SGR, as_shown, escape_unsafe
from ..userfiles import open_named
from .model import NO_RUNNER_EXIT, UNFINISHED

TAIL_BYTES = 64 * 1024
TAIL_LINES = 40
VERIFY_MAX_BYTES = 256 << 20

_SGR = re.compile(f"({SGR})")


@functools.cache
def _converter():
    from ansi2html import Ansi2HTMLConverter

    return Ansi2HTMLConverter(inline=True, scheme="xterm")


def _visible_line(line: str) -> str:
    """What a CI log shows of one line (``as_shown``, its colours kept: a redrawn line's pieces
    that still show, each on a line), other controls written as escapes."""
    pieces = as_shown(line, colour=True)
    return "\n".join(
        "".join(part if _SGR.fullmatch(part) else _escaped(part) for part in _SGR.split(piece)) for piece in pieces
    )


def _escaped(text: str) -> str:
    """Controls written out as escapes, tabs kept as tabs."""
    return "\t".join(escape_unsafe(piece) for piece in text.split("\t"))


def to_html(text: str) -> Markup:
    """Terminal text as safe HTML: colours as spans, everything else escaped."""
    visible = "\n".join(_visible_line(line) for line in text.split("\n"))
    return Markup(_converter().convert(visible, full=False, ensure_trailing_newline=False))


def read_tail(
    directory: str,
    path: str,
    sha256: str,
    kept: tuple | None = None,
    bytes_seen: int | None = None,
    given: bool = False,
    failed: bool = False,
) -> tuple[Markup | None, str | None]:
    """The last TAIL_LINES lines of the capture file at ``path`` inside ``directory`` (from its
    last TAIL_BYTES) as HTML, or None; and a note on the file (why it cannot be shown, what of
    the stream it lacks, and whether it still holds the bytes whose digest the run recorded).
    ``kept`` is the stream ranges the file holds; a gap between them inside the lines shown is
    marked. ``given``: the user named ``directory`` (``--capture-dir``), so a file there whose
    digest differs may be another capture, never known to be this run's changed, and a file
    there that cannot be read is named (the page shows the run's recorded path, not that one).
    ``failed``: the run failed, so the lines before the last ones shown that say why it failed
    (``why_lines``: a compiler's first error, pytest's ``E   assert``) are shown above them, each
    stretch left out counted, as the batch's closing block and its JUnit show them.

    The path comes from an untrusted stream or summary, often another user's: only a regular
    file named like a capture (stdout.log, stderr.log) is opened, only inside ``directory``
    (``userfiles.open_named``: no link another user made is followed, no ``..`` taken, no hard
    link to a file of this user's or root's in a directory others can change), and without
    blocking, so a stream can neither make the report wait on a FIFO nor copy another file's end
    onto the page.
    """
    if os.path.basename(path) not in FILE_NAMES.values():
        return None, "the recorded path does not name a capture file, so it is not read"
    read = os.path.join(directory, path) if given else None
    try:
        fd = open_named(path, RUN_FILE, inside=directory)
    except OSError as exc:
        return None, _unreadable(read, exc.strerror or str(exc))
    except InputError:
        return None, "the capture path is not a regular file, so it is not read"
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        try:
            note, total = _verified(file, info.st_size, sha256, read)
            window = max(0, info.st_size - TAIL_BYTES)
            file.seek(window)
            data = file.read(TAIL_BYTES)
            found = gaps(kept, bytes_seen)
            html, lines, texts = _lines_html(
                data, window, [(at - window, count) for at, count in found if window < at < info.st_size]
            )
            said = None  # what the box shows, in words, where it shows more than the last lines
            if failed and lines is not None:
                if total is None:  # not read whole, its lines not counted
                    note += ", nor its lines searched for those that say why"
                else:
                    from .why_lines import before_tail, not_shown

                    # the lines before the last ones that say why, and the stretches between
                    why, said = before_tail(file, info.st_size, total - lines, texts)
                    if why:
                        html = Markup("\n").join([_why_html(why, not_shown), html])
        except OSError as exc:
            return None, _unreadable(read, exc.strerror or str(exc))
    dropped = dropped_note(found, info.st_size)
    if dropped:
        note = f"{dropped}; {note}"
    if not data:
        return None, f"the capture file is empty; {note}"
    return html, _partial(lines, info.st_size, note, said)


def _unreadable(read: str | None, reason: str) -> str:
    """The note on a capture file that cannot be read, naming it once: the reason names the file
    itself where the walk refused it (``userfiles``: "DIR/stdout.log does not exist"); else the
    file from a directory the user gave (``read``) is named before it. Its path as a whole word:
    "xDIR/stdout.log" names another file."""
    reason = escape_unsafe(reason)
    if read is None:
        return f"the capture file cannot be read: {reason}"
    shown = escape_unsafe(read)
    if re.search(rf"(?:^|\s){re.escape(shown)}(?=$|[\s:,])", reason):
        return f"the capture file from the directory given cannot be read: {reason}"
    return f"{shown}, from the directory given, cannot be read: {reason}"


def _why_html(items: list, not_shown) -> Markup:
    """The lines that say why (``why_lines.before_tail``'s items), each stretch not shown counted
    in ``not_shown``'s words."""
    gap = Markup('<span class="gap">… {} …</span>')
    return Markup("\n").join(
        gap.format(not_shown(item)) if isinstance(item, int) else to_html(item[1]) for item in items
    )


def _partial(lines: int | None, size: int, note: str, said: str | None = None) -> str:
    """``note``, after what part of the file the box shows when it is not all of it: a box of
    the last lines reads as the whole output otherwise. ``said``: what it shows in words, where
    more than its last lines (``why_lines.said_words``)."""
    if lines is None:
        return note
    return f"{said or f'its last {lines} line(s)'} of {size_words(size)} shown; {note}"


# Why a ring's record has no digest, by what is known of its runner (``recovered_tail``'s
# ``state``): the digest's words, then the note's. Not known live and not known ended is said in
# the page's missing section's words (``model.NO_RUNNER_EXIT``), whose brackets the note's clause
# after it does not wrap.
RECOVERED = {
    "live": ("none yet: the run is still going", "the run is still going"),
    "ended": ("none: the runner ended without recording it", "the runner ended without recording the capture"),
    "unknown": (f"none: {UNFINISHED}", NO_RUNNER_EXIT),
}


def recovered_tail(item, state: str) -> tuple[CapturedStream, Markup | None, str]:
    """A ring run's stream with no ``output_captured`` (``events.kept.Salvage``): its facts as
    far as the marks tell them, the last lines of the bytes the ring holds, read in stream order,
    and a note saying where they come from (no digest was ever taken of them); ``state`` (a key
    of ``RECOVERED``) says what is known of its runner."""
    digest, why = RECOVERED[state]
    size = item.size
    stream = CapturedStream(
        stream=item.stream,
        path=item.path,
        bytes_seen=item.seen,
        bytes_written=size,
        sha256=digest,
        truncated=item.seen > size,
        write_error=item.write_error,
    )
    data = item.read(TAIL_BYTES)
    note = (
        f"{why}; these bytes were put in stream order from the ring's marks (capture-keep.json), the capture "
        "file itself is unordered"
    )
    if data is None:
        return stream, None, f"{note}; the capture file cannot be read as its marks say"
    window = size - len(data)
    found = gaps(item.ranges, item.seen)
    dropped = dropped_note(found, size)
    if dropped:
        note = f"{dropped}; {note}"
    if not data:
        held = "the stream had no byte" if not item.seen else "the ring holds no byte of the stream"
        return stream, None, f"{held}; {note}"
    html, lines, _ = _lines_html(data, window, [(at - window, count) for at, count in found if window < at < size])
    return stream, html, _partial(lines, size, note)


def _lines_html(data: bytes, window: int, inner: list[tuple[int, int]]) -> tuple[Markup, int | None, list[str]]:
    """The window's last TAIL_LINES lines, a marker line where ``inner`` gaps fall; how many
    lines of text that is when the file holds more before them (None when it is the whole); and
    those lines."""
    items: list[str | int] = []  # a line of text, or the bytes dropped at a gap
    start = 0
    for at, count in [*inner, (len(data), -1)]:
        items.extend(data[start:at].decode("utf-8", "replace").split("\n"))
        if count >= 0:
            items.append(count)
        start = at
    if items and items[-1] == "":
        items = items[:-1]
    if window and items and isinstance(items[0], str):  # the first line was cut by the byte window
        rest = items[1:]  # dropped, unless no other line has text: then kept, marked, with the gaps
        if not any(isinstance(item, str) and item for item in rest):  # a gap's marker is not a line
            rest = ["…" + items[0], *(item for item in rest if isinstance(item, int))]
        items = rest
    parts: list[Markup] = []
    text: list[str] = []
    shown = items[-TAIL_LINES:]
    texts = [item for item in shown if isinstance(item, str)]
    lines = len(texts) if window or len(items) > TAIL_LINES else None
    for item in shown:
        if isinstance(item, str):
            text.append(item)
            continue
        if text:
            parts.append(to_html("\n".join(text)))
            text = []
        parts.append(Markup('<span class="gap">… {} dropped here …</span>').format(size_words(item)))
    if text:
        parts.append(to_html("\n".join(text)))
    return Markup("\n").join(parts), lines, texts


def _verified(file, size: int, sha256: str, read: str | None) -> tuple[str, int | None]:
    """Whether the file still holds the bytes the run recorded, and its lines (counted as ``wc
    -l`` does, a last line without a line feed too; None where it is not read whole); ``read``:
    the file read in a directory the user named, which may hold another run's capture, so a
    differing digest names that file and claims no change."""
    if size > VERIFY_MAX_BYTES:
        return f"the file is over {VERIFY_MAX_BYTES >> 20} MiB, so its SHA-256 was not checked", None
    digest = hashlib.sha256()
    lines, last = 0, b""
    while chunk := file.read(1 << 20):
        digest.update(chunk)
        lines += chunk.count(b"\n")
        last = chunk[-1:]
    lines += last not in (b"", b"\n")
    if digest.hexdigest() == sha256:
        return "the file's SHA-256 matches the one the run recorded", lines
    if read is not None:
        return (
            f"the SHA-256 of {escape_unsafe(read)}, the file read, differs from the one the run recorded: "
            "it is another capture than this run's, or it changed after the run"
        ), lines
    return "the file's SHA-256 differs from the one the run recorded: it changed after the run", lines
