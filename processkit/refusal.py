"""The API's refusal of a caller's argument, as a ValueError: its text is what the CLI's error
line shows of the same refusal (``diagnostics.shown``), every terminal-unsafe character of the
value it quotes written as its escape (``\\x1b``), so an ESC given in a label or a timeout never
reaches a traceback on a terminal raw (``text.cut`` only shortens a value)."""

from __future__ import annotations

from .text import escape_unsafe


def refused(message: str) -> ValueError:
    return ValueError(escape_unsafe(message))
