"""A template's argument source read as lines (a ``::::`` file, stdin): each line without its
newline, in the OS's decoding (a line that is not UTF-8 keeps its bytes), within a manifest's
own bounds (``ARGUMENTS``). A byte order mark first in the source (``EF BB BF``, as Notepad
saves UTF-8) is skipped: it was kept in the first argument, a character no terminal shows; one
elsewhere is the line's own."""

from __future__ import annotations

import contextlib
import os

from ..bounded import BOM, MiB, InputError, Limits, lines
from ..errors import Failure, Kind, usage
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
            yield _decoded(line, number == 1)


def source_lines_as_they_come(handle, path: str) -> Iterator[str | Awaited]:
    """``source_lines``, each read only once the source is readable (``Awaited`` until then)."""
    first = True
    with _reading(path):
        for line in lines_as_they_come(handle.fileno(), path, ARGUMENTS):
            if isinstance(line, Awaited):
                yield line
            else:
                yield _decoded(line, first)
                first = False


def _decoded(line: bytes, first: bool) -> str:
    """A source's line without its newline (``first``: without a byte order mark before it), in
    the OS's decoding (bytes kept)."""
    if first:
        line = line.removeprefix(BOM)
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
