"""A template's argument source read as lines (a ``::::`` file, stdin): each line without its
newline, in the OS's decoding (a line that is not UTF-8 keeps its bytes), within a manifest's
own bounds (``ARGUMENTS``). A byte order mark first in the source (``EF BB BF``, as Notepad
saves UTF-8) is skipped: it was kept in the first argument, a character no terminal shows; one
elsewhere is the line's own. A first line that ends in CR LF (a Windows text file) is warned of,
as GNU parallel warns: each argument keeps its carriage return, which no terminal shows either."""

from __future__ import annotations

import contextlib
import os

from ..bounded import BOM, MiB, InputError, Limits, lines
from ..diagnostics import warn
from ..errors import Failure, Kind, usage
from ..text import cut as quoted
from .piped import Awaited, lines_as_they_come

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

# A source file or stdin, read line by line within a manifest's own bounds.
ARGUMENTS = Limits("argument source", total=256 * MiB, regular=False)


def source_lines(handle, path: str) -> Iterator[str]:
    """Each line of an argument source without its newline, in the OS's decoding (bytes kept)."""
    with _reading(path):
        for number, line in lines(handle, path, ARGUMENTS):
            yield _decoded(line, path if number == 1 else None)


def source_lines_as_they_come(handle, path: str) -> Iterator[str | Awaited]:
    """``source_lines``, each read only once the source is readable (``Awaited`` until then)."""
    first = True
    with _reading(path):
        for line in lines_as_they_come(handle.fileno(), path, ARGUMENTS):
            if isinstance(line, Awaited):
                yield line
            else:
                yield _decoded(line, path if first else None)
                first = False


def _decoded(line: bytes, first: str | None) -> str:
    """A source's line without its newline (``first``, the source's path on its first line:
    without a byte order mark before it, and a CR LF end said), in the OS's decoding (bytes kept)."""
    if first is not None:
        line = line.removeprefix(BOM)
        if line.endswith(b"\r\n"):
            warn(
                f"the argument source {quoted(first, 64)} ends its first line in CR LF (a Windows "
                "text file): each argument keeps its carriage return (\\r); strip them first "
                "(tr -d '\\r' < FILE)"
            )
    return os.fsdecode(line[:-1] if line.endswith(b"\n") else line)


@contextlib.contextmanager
def _reading(path: str):
    """A source's bound hit, a usage Failure; a read that failed, a setup one."""
    try:
        yield
    except InputError as exc:
        raise usage(str(exc)) from None
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot read the argument source {path}: {exc.strerror}") from None
