"""The runner's own lines on stderr and stdout: printing them can never fail a run.

A caller that closed or broke the stream loses the text, never the exit code.
"""

from __future__ import annotations

import sys

from .text import escape_unsafe


def say(stream, text: str) -> None:
    """Write and flush ``text``; a failed write is dropped."""
    try:
        stream.write(text)
        stream.flush()
    except OSError:
        pass


def warn(message: str) -> None:
    say(sys.stderr, f"processkit-cli: warning: {escape_unsafe(message)}\n")
