"""The last lines of a capture file as HTML: terminal colours become coloured spans, and no
raw escape reaches the page.

Facts about what captures hold: a ``--pty`` capture keeps what the child wrote to its
terminal, so SGR colour sequences (``ESC [ ... m``), cursor and erase sequences (``ESC [ K``),
carriage returns (progress bars redraw a line) and CRLF line ends. SGR becomes colour
(ansi2html, which also escapes the text); other CSI sequences only move the cursor and are
dropped; a carriage return keeps what the terminal would finally show on that line; any
other control character (OSC titles, BEL, stray ESC) is written out as text.
"""

from __future__ import annotations

import functools
import os
import re

from markupsafe import Markup

from ..text import escape_unsafe

TAIL_BYTES = 64 * 1024
TAIL_LINES = 40

_SGR = re.compile(r"(\x1b\[[0-9;:]*m)")
_OTHER_CSI = re.compile(r"\x1b\[[0-9;:?<=>]*[ -/]*[@-ln-~]")


@functools.lru_cache(maxsize=None)
def _converter():
    from ansi2html import Ansi2HTMLConverter

    return Ansi2HTMLConverter(inline=True, scheme="xterm")


def _visible_line(line: str) -> str:
    """What a terminal leaves on one line: the text after its last carriage return, with
    cursor sequences gone and other controls written as escapes (SGR kept for colour)."""
    line = _OTHER_CSI.sub("", line.rstrip("\r"))
    line = line.rsplit("\r", 1)[-1]
    return "".join(part if _SGR.fullmatch(part) else _escaped(part) for part in _SGR.split(line))


def _escaped(text: str) -> str:
    """Controls written out as escapes, tabs kept as tabs."""
    return "\t".join(escape_unsafe(piece) for piece in text.split("\t"))


def to_html(text: str) -> Markup:
    """Terminal text as safe HTML: colours as spans, everything else escaped."""
    visible = "\n".join(_visible_line(line) for line in text.split("\n"))
    return Markup(_converter().convert(visible, full=False, ensure_trailing_newline=False))


def read_tail(path: str) -> tuple[Markup | None, str | None]:
    """The last TAIL_LINES lines of the file at ``path`` (from its last TAIL_BYTES) as HTML,
    or None and why they cannot be shown."""
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            file.seek(max(0, size - TAIL_BYTES))
            data = file.read(TAIL_BYTES)
    except OSError as exc:
        return None, f"the capture file cannot be read: {exc.strerror}"
    if not data:
        return None, "the capture file is empty"
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first line was cut by the byte window
    if lines and lines[-1] == "":
        lines = lines[:-1]
    return to_html("\n".join(lines[-TAIL_LINES:])), None
