"""Progress on a terminal, drawn one way for every command that shows it (``batch``'s bar
below its job lines, ``bench``'s line per command): a region of live lines at the bottom of the
screen, redrawn in place, with lines that stay printed above it.

The cursor rests at the end of the region's last line, so a region of one line leaves no empty
row below it and a line printed above starts where the region did. Every row written is
erased first and cut to the terminal's width (a row that wrapped would throw the cursor's moves
off), and ``clear`` leaves the cursor where the region began, so what the command prints after
(a summary) takes its place. Off a terminal nothing is drawn: ``above``'s lines are written as
they are, and the region never is. Only terminal bytes are written, never anything read back.
"""

from __future__ import annotations

import os

from .writeall import write_own

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class Writer(Protocol):
        def write(self, data: bytes) -> None: ...


WIDTH = 30  # a bar's cells
HOME = "\r"  # the start of the row the cursor is on
ERASE_LINE = "\x1b[K"  # from the cursor (the row's start here) to its end
ERASE_BELOW = "\x1b[J"  # from the cursor to the end of the screen


def bar(done: int, total: int | None, width: int = WIDTH) -> str:
    """``[######........]``: ``done`` of ``total`` (a total of 0 is done; None, not known yet:
    an empty bar)."""
    if total is None:
        return f"[{'.' * width}]"
    filled = width * min(done, total) // total if total > 0 else width
    return f"[{'#' * filled}{'.' * (width - filled)}]"


def eta(spent: float, done: int, total: int) -> float:
    """The seconds left when ``done`` of ``total`` took ``spent``, at the same pace (0 before
    the first is done: nothing to go by)."""
    return spent / done * max(total - done, 0) if done else 0.0


def drawable(fd: int) -> bool:
    """Whether ``fd`` is a terminal that moves its cursor: not one whose ``TERM`` is ``dumb`` (an
    editor's shell buffer, a CI log viewer's pseudo-terminal), which would show every erase and
    cursor move as text; lines that stay are written there as off a terminal."""
    return os.isatty(fd) and os.environ.get("TERM") != "dumb"


def terminal_rows(fd: int, otherwise: int = 24) -> int:
    """The rows of the terminal on ``fd`` (``otherwise`` when it is none)."""
    try:
        return os.get_terminal_size(fd).lines
    except OSError:
        return otherwise


class LiveLines:
    """The live region on ``fd``; ``draw`` False (not a terminal, or the command's choice)
    draws nothing. ``out``: what writes ``fd``'s bytes when not this (``batch``'s live output,
    which never waits in a write on its loop: ``cli/batch_output.py``); its own failures are its
    own."""

    def __init__(self, fd: int, draw: bool, out: Writer | None = None):
        self.fd = fd
        self.draw = draw
        self._out = out
        self._shown = 0  # rows of the region on the screen now
        self._gone = False  # a write failed: nothing more is written

    def show(self, lines: list[str]) -> None:
        """The region redrawn as ``lines``, in place."""
        if not self.draw:
            return
        text = self._home() + "\n".join(ERASE_LINE + line for line in self._fit(lines))
        if len(lines) < self._shown:
            text += ERASE_BELOW
        self._shown = len(lines)
        self._write(text)

    def above(self, text: str, lines: list[str] | None = None) -> None:
        """``text`` printed for good above the region, which is redrawn below it as ``lines``
        (none: left off until the next ``show``)."""
        if not self.draw:
            self._write(text.rstrip("\n") + "\n")
            return
        cleared = self._cleared()
        self._shown = 0
        rows = self._fit(lines or [])
        self._write(cleared + text.rstrip("\n") + "\n" + "\n".join(rows))
        self._shown = len(rows)

    def clear(self) -> None:
        """The region erased, the cursor where it began."""
        if self.draw:
            cleared = self._cleared()
            self._shown = 0
            if cleared:
                self._write(cleared)

    def _cleared(self) -> str:
        if not self._shown:
            return ""
        return self._home() + ERASE_LINE + (ERASE_BELOW if self._shown > 1 else "")

    def _home(self) -> str:
        """To the start of the region's first row (the cursor is on its last)."""
        return HOME + (f"\x1b[{self._shown - 1}A" if self._shown > 1 else "")

    def _fit(self, lines: list[str]) -> list[str]:
        try:
            columns = os.get_terminal_size(self.fd).columns
        except OSError:
            return lines
        if columns < 2:  # a terminal that says no size (a fresh pty's 0x0): nothing to cut to
            return lines
        return [line[: columns - 1] for line in lines]

    def _write(self, text: str) -> None:
        """A reader that went away (``2>&1 | head``) or a failed write ends the drawing there,
        never the command (as ``diagnostics.say`` drops a warning): a batch's jobs run on. So does
        a drawing cut short on a stream whose reader the runner gave up as stalled
        (``writeall.write_own``): a row half drawn is drawn no more."""
        if self._out is not None:
            self._out.write(text.encode("utf-8", "replace"))
            return
        if self._gone:
            return
        data = text.encode("utf-8", "replace")
        try:
            self._gone = write_own(self.fd, data) < len(data)
        except OSError:
            self._gone = True
