"""A command line split into words as a POSIX shell splits it, and as hyperfine splits ``-N``'s
commands and ``-S``'s shell (its ``shell-words`` crate): no expansion, no operators, only quotes,
backslashes and comments.

Where this differs from ``shlex.split``: inside double quotes a backslash escapes ``$``, a
backquote, ``"``, ``\\`` and a newline (a line continuation), and is kept before any other
character; outside quotes a backslash before a newline joins the lines; a ``#`` that starts a
word begins a comment to the line's end. ``shlex`` kept ``\\$`` as two characters and passed
``#`` on as a word, so ``-N 'sh -c "kill \\$\\$"'`` ran another command than hyperfine's.
"""

from __future__ import annotations

BLANKS = " \t\n"
ESCAPED_IN_DOUBLE = '$`"\\'
EXPANDED_IN_DOUBLE = "$`"  # what a shell still reads in double quotes
# What bench says after the not-found line of a shell-free command (``--command``, ``-- PROGRAM``,
# a quoted ``-N`` word) that is a whole shell line (``spawn_words.shell_line_hint``): its own ways out.
SHELL_LINE_HINT = (
    "hint: no shell splits a --command or a -- PROGRAM: give its words apart (--command "
    """'["PROGRAM", "ARG"]'), or give the line as a COMMAND for the shell to run (bench 'LINE', without -N)"""
)


def split(text: str) -> list[str]:
    """``text``'s words; a ``ValueError`` for a quote left open (or a backslash ending text
    inside double quotes)."""
    return scan(text)[0]


def scan(text: str) -> tuple[list[str], set[str]]:
    """``text``'s words (``split``), and the characters a shell would read as its own: those
    outside quotes not escaped by a backslash (blanks included, a comment's not), and in double
    quotes an unescaped ``$`` or backquote (``EXPANDED_IN_DOUBLE``)."""
    bare: set[str] = set()
    words: list[str] = []
    word: list[str] = []
    started = False  # a word is under way (an empty quoted word is a word)
    at, end = 0, len(text)
    while at < end:
        char = text[at]
        at += 1
        if char in BLANKS:
            bare.add(char)
            if started:
                words.append("".join(word))
                word, started = [], False
        elif char == "#" and not started:
            newline = text.find("\n", at)
            at = end if newline < 0 else newline
        elif char == "\\":
            if at == end:
                word.append("\\")  # a trailing backslash is itself, as the crate keeps it
            elif text[at] == "\n":
                at += 1  # a line continuation: nothing
                continue
            else:
                word.append(text[at])
                at += 1
            started = True
        elif char == "'":
            close = text.find("'", at)
            if close < 0:
                raise ValueError("no closing quotation")
            word.append(text[at:close])
            at, started = close + 1, True
        elif char == '"':
            at = _double_quoted(text, at, word, bare)
            started = True
        else:
            bare.add(char)
            word.append(char)
            started = True
    if started:
        words.append("".join(word))
    return words, bare


def _double_quoted(text: str, at: int, word: list[str], bare: set[str]) -> int:
    """The double-quoted part of a word from ``at`` (just past its opening quote) into ``word``
    (its unescaped expansions into ``bare``); where the text goes on after its closing quote."""
    end = len(text)
    while at < end:
        char = text[at]
        at += 1
        if char == '"':
            return at
        if char != "\\":
            if char in EXPANDED_IN_DOUBLE:
                bare.add(char)
            word.append(char)
        elif at == end:
            break
        elif text[at] == "\n":
            at += 1
        else:
            if text[at] not in ESCAPED_IN_DOUBLE:
                word.append("\\")
            word.append(text[at])
            at += 1
    raise ValueError("no closing quotation")
