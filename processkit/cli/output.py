"""Client output: JSON that keeps the original bytes, and human text that is terminal-safe
(each control or formatting character shown as a space, long strings capped)."""

from __future__ import annotations

import errno
import json
import sys

from ..errors import Failure, Kind, StdoutClosed
from ..text import sanitize
from ..writeall import write_all, write_bounded


def json_line(value) -> None:
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogateescape")
    _write(data + b"\n")


def lines(text: list[str], stall: float | None = None) -> None:
    _write("".join(line + "\n" for line in text).encode("utf-8"), stall)


def raw(data: bytes) -> None:
    """Bytes exactly as given (a pass-through of someone else's output)."""
    _write(data)


def _write(data: bytes, stall: float | None = None) -> None:
    """Every client's stdout goes through here. A reader that went away ends the command
    quietly (main maps it to STDOUT_CLOSED); any other failed write is a setup failure. It
    waits for the reader as a blocking write would (a client read a page at a time by a pager),
    or with ``stall`` (a runner's words after its runs: ``bench``'s), in writes that cannot block,
    the rest dropped once the reader took nothing for that long, the exit code the runner's
    (``diagnostics.say``'s bound: a stdout its runs' echo filled, that nobody reads)."""
    try:
        sys.stdout.flush()
        if stall is None:
            write_all(sys.stdout.fileno(), data)  # the buffered writer cut short on a non-blocking pipe
        else:
            write_bounded(sys.stdout.fileno(), data, stall)
    except BrokenPipeError:
        raise StdoutClosed from None
    except OSError as exc:
        if exc.errno == errno.ETIMEDOUT and stall is not None:
            return
        raise Failure(Kind.SETUP, f"cannot write to standard output: {exc.strerror or exc}") from None


def cell(value) -> str:
    """One value as a human sees it: ``-`` for nothing, a flag as the JSON says it (``false``,
    not Python's ``False``), everything else sanitized."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "-" if value is None else sanitize(str(value))


def table(headers: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns two spaces apart; cells must already be cell()-safe."""
    widths = [max([len(header)] + [len(row[i]) for row in rows]) for i, header in enumerate(headers)]
    return ["  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip() for row in [list(headers), *rows]]


def fields(pairs: list[tuple[str, object]]) -> list[str]:
    """Aligned ``key: value`` lines: each value two spaces past the longest ``key:`` (the reference's)."""
    width = max(len(key) for key, _ in pairs) + 3
    return [f"{key + ':':<{width}}{cell(value)}" for key, value in pairs]
