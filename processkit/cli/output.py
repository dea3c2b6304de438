"""Client output: JSON that keeps the original bytes, and human text that is terminal-safe
(each control or formatting character shown as a space, long strings capped)."""

from __future__ import annotations

import json
import sys

from ..errors import Failure, Kind, StdoutClosed
from ..text import sanitize
from ..writeall import write_all, write_own


def json_line(value) -> None:
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogateescape")
    _write(data + b"\n")


def lines(text: list[str]) -> None:
    _write("".join(line + "\n" for line in text).encode("utf-8"))


def own_lines(text: list[str]) -> None:
    """``text`` as lines, the runner's own words after its runs (``bench``'s): cut where its runs'
    echo gave the reader (a pipe's) up as stalled (``_write``'s ``own``), and the cut said on
    stderr; where that warning cannot be said whole (a stderr given up too: ``2>&1`` into that
    pipe; ``--error-format json``), a failed write of stdout (111), so the exit code says it."""
    data = "".join(line + "\n" for line in text).encode("utf-8")
    written = _write(data, own=True)
    if written < len(data):
        from ..diagnostics import warn
        from ..engine.teardown import ECHO_STALL_SECONDS

        cut = (
            f"the reader of stdout took nothing for {ECHO_STALL_SECONDS:g}s: "
            f"the results were cut after {written} of {len(data)} bytes"
        )
        if not warn(cut):
            raise Failure(Kind.SETUP, f"cannot write to standard output: {cut}")


class Held:
    """Lines printed as a benchmark goes (``own_lines``) until a write fails: that first failure
    (a closed stdout, 141; a failed write, 111) is held and later lines dropped, so every command
    still runs and is exported, and the benchmark's own failure (its regression gate's 119 too)
    keeps priority; ``raise_held`` raises what was held, once the final exports are written."""

    def __init__(self) -> None:
        self.failed: StdoutClosed | Failure | None = None

    def print(self, text: list[str]) -> None:
        if self.failed is None:
            try:
                own_lines(text)
            except (StdoutClosed, Failure) as failed:
                self.failed = failed

    def raise_held(self) -> None:
        if self.failed is not None:
            raise self.failed


def raw(data: bytes) -> None:
    """Bytes exactly as given (a pass-through of someone else's output)."""
    _write(data)


def _write(data: bytes, own: bool = False) -> int:
    """Every client's stdout goes through here; how many bytes of ``data`` went in. A reader
    that went away ends the command quietly (main maps it to STDOUT_CLOSED); any other failed
    write is a setup failure. It waits for the reader as a blocking write would (a client read a
    page at a time by a pager); with ``own`` (a runner's words after its runs: ``bench``'s) only
    until the runner gave that reader up as stalled (``writeall.write_own``: a stdout its runs'
    echo filled, that nobody reads; a terminal's always, ``shared``: hyperfine prints it too), the
    rest then dropped, the caller told by the count."""
    try:
        sys.stdout.flush()
        if own:
            return write_own(sys.stdout.fileno(), data, shared=True)
        write_all(sys.stdout.fileno(), data)  # the buffered writer cut short on a non-blocking pipe
        return len(data)
    except BrokenPipeError:
        raise StdoutClosed from None
    except OSError as exc:
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
