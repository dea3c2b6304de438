"""Character-level rules: what is safe to show on a terminal, what may name an env variable,
a run or a label. The CLI checks input against them; the registry re-checks what it reads back."""

from __future__ import annotations

import os

# Unicode format characters that can reorder or hide text on a terminal (docs/run.md §2.4).
_FORMAT_RANGES = (
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)


def is_control(ch: str) -> bool:
    point = ord(ch)
    return point < 0x20 or 0x7F <= point < 0xA0


def is_terminal_unsafe(ch: str) -> bool:
    """Control characters, the format characters that can disguise terminal output, and lone
    surrogates (undecoded bytes, which no terminal can be sent as text)."""
    point = ord(ch)
    return is_control(ch) or 0xD800 <= point <= 0xDFFF or any(lo <= point <= hi for lo, hi in _FORMAT_RANGES)


def is_terminal_safe(text: str) -> bool:
    if text.isascii() and text.isprintable():  # U+0020-U+007E only: no control, no format character
        return True
    return not any(is_terminal_unsafe(ch) for ch in text)


def unencodable(text: str) -> str | None:
    """The first character of ``text`` the OS cannot be given (``os.fsencode``), else None: a
    lone surrogate such as JSON's ``"\\ud800"``, which, unlike an undecoded byte, has no bytes."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError as exc:
        return text[exc.start]
    return None


def uncarried(text: str) -> str | None:
    """What in ``text`` no argument, environment entry or path can carry, in words, else None:
    a NUL (execve's strings end at one) or a lone surrogate (``unencodable``)."""
    if "\0" in text:
        return f"a NUL character (at offset {text.index(chr(0))})"
    if text.isascii():
        return None  # no surrogate is ASCII: the common case skips the encoding
    bad = unencodable(text)
    return None if bad is None else f"a lone surrogate ({bad!a})"


# Unicode White_Space as Rust's ``char::is_whitespace`` has it: Python's ``str.isspace`` also
# counts U+001C-U+001F, so ``str.strip()`` would blank a line the reference rejects.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


def is_valid_run_id(text: str) -> bool:
    return 1 <= len(text) <= 256 and is_terminal_safe(text)


def is_valid_label_key(key: str) -> bool:
    """``[A-Za-z_][A-Za-z0-9._-]*``, at most 64 bytes (ASCII only, so characters are bytes)."""
    return (
        0 < len(key) <= 64
        and key.isascii()
        and (key[0].isalpha() or key[0] == "_")
        and all(ch.isalnum() or ch in "._-" for ch in key)
    )


def is_valid_label_value(value: str) -> bool:
    return len(value) <= 256 and is_terminal_safe(value)


def env_key_problem(key: str) -> str | None:
    """Why ``key`` cannot name an environment variable, or None when it can."""
    if not key:
        return "an environment key may not be empty"
    if key.isascii() and key.isprintable() and " " not in key and "=" not in key:
        return None  # the common case, each of a large env's keys: no character walked in Python
    if any(ch.isspace() or ch == "\u00a0" for ch in key):
        return "an environment key may not contain whitespace"
    if any(is_control(ch) for ch in key) or "=" in key:
        return "an environment key may not contain control characters or '='"
    return None


def escape_unsafe(text: str) -> str:
    """One line for a terminal that keeps what was typed: every unsafe character (a newline
    included) is written as its Python escape, ``\\x1b``, ``\\n``, ``\\u202e``."""
    return "".join(ch.encode("unicode_escape").decode("ascii") if is_terminal_unsafe(ch) else ch for ch in text)


VALUE_SHOWN = 64  # the most of a refused value an error message quotes


def cut(text: str, limit: int = VALUE_SHOWN) -> str:
    """A value as an error message quotes it: whole when short, else its first ``limit``
    characters and how long it was (a 5,000-digit number is not echoed back whole)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def plural(count: int, noun: str, many: str = "") -> str:
    """``1 command``, ``3 commands``: a count with its noun agreeing (``many``: a plural not made
    by an ``s``, ``processes``); the report's templates' ``plural`` filter."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def signal_named(number: int):
    """``signal.Signals(number)``, or None for a number Python does not name. ``signal`` (its
    enums) is imported only here, off a plain run's start-up."""
    import signal

    try:
        return signal.Signals(number)
    except ValueError:
        return None


def killed_by(number: int) -> str:
    """``killed by signal 9 (SIGKILL)``: a death by a signal, which its exit code (128 + N) alone
    cannot tell from a child that exited with that code."""
    named = signal_named(number)
    return f"killed by signal {number}" if named is None else f"killed by signal {number} ({named.name})"


def died_with(number: int) -> str:
    """``died with <Signals.SIGKILL: 9>``: subprocess's words (``CalledProcessError``'s) for a
    child a signal ended, so a caller moving from ``subprocess`` reads what it read there."""
    named = signal_named(number)
    return f"died with unknown signal {number}" if named is None else f"died with {named!r}"


# A terminal's escape sequences: a control sequence (CSI: a colour ``ESC [ 31 m``, a cursor move,
# an erase ``ESC [ K``), an operating system command (OSC: a title, GCC's ``-fdiagnostics-urls``
# link ``ESC ] 8 ;; URL ESC \``, ended by BEL or ``ESC \``) and a two-byte escape (a character set
# ``ESC ( B``, a keypad mode ``ESC =``, a cursor save ``ESC 7``)
ESCAPES = r"\x1b\[[0-9;:?<=>]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()*+][0-~]|\x1b[=>78]"
SGR = r"\x1b\[[0-9;:]*m"  # the CSI that sets a colour, which a page draws (``report.tail``)


def as_shown(line: str, colour: bool = False) -> list[str]:
    """One line of a child's output as the plain text a CI log shows of it: its escape sequences
    (``ESCAPES``: colours, cursor moves, links) gone, so a coloured ``FAILED tests/x.py::test_y``
    reads, and greps, as one in a CI log or a JUnit report; and, for a line redrawn by carriage
    returns, each piece between them that holds text and that no later piece covers whole (one at
    least as long): a progress line ``10%\\r50%\\r100%`` is ``100%``, what the terminal finally
    shows, while ``ERROR boom\\r50%\\rdone``, whose shorter redraws leave the error on the terminal
    (as ``doneR boom``), is two lines, ``ERROR boom`` and ``done``: a terminal's overlay garbles
    both, and GitHub's log viewer would give every piece a line. ``colour``: the colours (``SGR``)
    kept, for the page, which draws them (``report.tail``), and not counted in a piece's length.
    ``re`` is imported only here, off a plain run's start-up."""
    if "\x1b" not in line and "\r" not in line:
        return [line]
    import re

    escapes = f"(?!{SGR})(?:{ESCAPES})" if colour else ESCAPES
    text = re.sub(escapes, "", line.rstrip("\r"))
    if "\r" not in text:
        return [text]
    kept: list[str] = []
    widest = 0  # the longest piece after this one
    for piece in reversed(text.split("\r")):
        plain = re.sub(SGR, "", piece) if colour else piece
        if not kept or (len(plain) > widest and plain.strip(WHITESPACE)):
            kept.append(piece)
        widest = max(widest, len(plain))
    return kept[::-1]


def whole_chars(data: bytes, head_cut: bool = False, tail_cut: bool = False) -> bytes:
    """Bytes cut out of a larger UTF-8 text, a character the cut split at the head
    (``head_cut``) or the tail (``tail_cut``) left out whole: decoded, it shows no U+FFFD beside
    the note that says what was cut (a byte no UTF-8 character holds still does)."""
    start = 0
    if head_cut:
        while start < min(3, len(data)) and data[start] & 0xC0 == 0x80:  # a character's continuation bytes
            start += 1
    end = len(data)
    if tail_cut:
        for back in range(1, min(3, end - start) + 1):
            byte = data[end - back]
            if byte & 0xC0 != 0x80:  # the last character's first byte: whole, or cut here
                # (0xF8 and over begin none: kept, as any byte no character holds)
                end -= back if 0xC0 <= byte < 0xF8 and back < (2 if byte < 0xE0 else 3 if byte < 0xF0 else 4) else 0
                break
    return data[start:end]


def shown_lines(text: str) -> list[str]:
    """``text``'s lines (split at line feeds only: a carriage return redraws a line, it does not
    start one) each ``as_shown``, every other character a terminal cannot be shown (a NUL, a
    stray ESC: ``is_terminal_unsafe``, a tab aside) as a space, as ``sanitize`` shows it: the one
    reading of a tail for the closing block and the JUnit report, so the two agree (the JUnit
    gave U+FFFD where the block gave a space). Plain text is only split."""
    lines = text.split("\n")
    if "\x1b" in text or "\r" in text:
        lines = [piece for line in lines for piece in as_shown(line)]
    if is_terminal_safe(text.replace("\n", "").replace("\t", "").replace("\r", "")):
        return lines
    return [_spaced(line, "\t") for line in lines]


def sanitize(text: str, limit: int = 256) -> str:
    """Terminal-safe rendering for human output: each unsafe character shown as a space (as the
    reference's terminal boundary does, so `a<LF>b` stays two words), length capped."""
    if text.isascii() and text.isprintable():
        clean = text  # printable ASCII holds no control, format or surrogate character
    else:
        clean = _spaced(text)
    return clean if len(clean) <= limit else clean[:limit] + "..."


def quoted(text: str, limit: int = 256) -> str:
    """A command's name in a message, sanitized and quoted so that it reads once, its own quotes
    untouched: ``'make test'`` as hyperfine's messages quote it, ``"sh -c 'echo a  b'"`` where it
    holds a single quote (``'sh -c 'echo a  b''`` read as two quoted strings), and where it holds
    both kinds or ends in a backslash (``'x\\'`` reads as an escaped closing quote), in single
    quotes with its single quotes and backslashes escaped (``'a \\'b\\' "c"'``, ``'x\\\\'``)."""
    shown = sanitize(text, limit)
    if not shown.endswith("\\"):
        if "'" not in shown:
            return f"'{shown}'"
        if '"' not in shown:
            return f'"{shown}"'
    return "'" + shown.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _spaced(text: str, kept: str = "") -> str:
    """``text`` with each character a terminal cannot be shown as a space (but those in ``kept``):
    ``sanitize``'s and ``shown_lines``' one way."""
    return "".join(" " if is_terminal_unsafe(ch) and ch not in kept else ch for ch in text)


NAMES_SHOWN = 5  # the most names a one-line warning lists before saying how many more


def first_named(names: list[str], total: int | None = None) -> str:
    """``a, b, c, d, e and 3 more``: the first ``NAMES_SHOWN`` of ``names``, each sanitized, and how
    many of ``total`` (``len(names)`` unless given: ``names`` may hold only the first ones) are
    left unnamed (a warning that lists ids stays one line however many there are)."""
    count = len(names) if total is None else total
    more = f" and {count - NAMES_SHOWN} more" if count > NAMES_SHOWN else ""
    return ", ".join(sanitize(name) for name in names[:NAMES_SHOWN]) + more


def milliseconds(value: float | None) -> str:
    """A duration as the summary gives it (ms, fractional), the one way a batch's page and its
    terminal lines write one (a 20-minute shard's line was ``in 1203456.789 ms``),
    at a precision that reads: 0.352 ms, 985.7 ms, 1.012 s, 2 min 3 s, 1 h 5 min."""
    if value is None:
        return "—"
    if value < 1000:
        return _trimmed(value, 3 if value < 10 else 1) + " ms"
    if value < 60_000:
        return _trimmed(value / 1000, 3) + " s"
    hours, rest = divmod(int(value) // 1000, 3600)
    minutes, seconds = divmod(rest, 60)
    return " ".join(f"{count} {unit}" for count, unit in ((hours, "h"), (minutes, "min"), (seconds, "s")) if count)


def _trimmed(value: float, places: int) -> str:
    """``value`` to ``places`` decimals, without trailing zeros: 1.5, 2, 985.7."""
    text = f"{value:.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
