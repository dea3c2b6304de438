"""The runner's own lines on stderr and stdout: printing them can never fail a run.

A caller that closed or broke the stream loses the text, never the exit code. Under
``--error-format json`` stderr belongs to the one-line error envelope: warnings and notes are
not written there at all (docs/differences.md), so a machine reader never meets prose.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

_routed: Callable[[str], None] | None = None


def route(to: Callable[[str], None] | None) -> None:
    """While set, what is said on ``sys.stderr`` goes to ``to`` instead (None: straight again):
    a batch's loop turns (``cli/batch_output.py``), and a warning written straight to stderr
    would wait in the write for a stalled reader, holding the loop, and come out ahead of the
    job lines queued before it."""
    global _routed
    _routed = to


def say(stream, text: str) -> None:
    """Write and flush ``text``; a failed write is dropped."""
    if _routed is not None and stream is sys.stderr:
        _routed(text)
        return
    try:
        stream.write(text)
        stream.flush()
    except OSError:
        pass


_envelope_only = False


def envelope_only() -> None:
    """``--error-format json``: from now on, nothing but the failure envelope goes to stderr."""
    global _envelope_only
    _envelope_only = True


def note(line: str) -> None:
    """One line of ours on stderr that is not the failure (a note, a warning, a notice)."""
    if not _envelope_only:
        say(sys.stderr, line + "\n")


_said: set[str] | None = None  # ``once``: the warnings said so far
SAID_MOST = 4096  # past this many distinct warnings, a new one is said every time


def once() -> None:
    """From now on a warning already said is not said again: ``bench`` carries its many runs in
    one process, and each run would repeat it (a full disk under ``--jsonl-dir``: two lines a run)."""
    global _said
    _said = set()


def warn(message: str) -> None:
    if _said is not None:
        if message in _said:
            return
        if len(_said) < SAID_MOST:
            _said.add(message)
    note(shown(f"warning: {message}"))


def shown(message: str) -> str:
    """The program's line for ``message``, its terminal controls made visible. ``text`` is imported
    here, not by the caller: a run that says nothing loads none, and a run that fails to start
    (its line said by ``cli``) counts it as its work's, kept out of the plain runs' bundle."""
    from .text import escape_unsafe

    return f"processkit-cli: {escape_unsafe(message)}"
