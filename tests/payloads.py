"""Deterministic binary payloads, built the same way by a test and by its child program.

A child imports this file by path (``child_command``), so the test never has to trust the runner
to tell it what was produced.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

# NUL, CR, CRLF, stray continuation bytes, an invalid and a truncated UTF-8 sequence.
NASTY = b"\x00nul\r\ncrlf\rcr\xff\xfe\xc3\x28\x80 cut:\xe2\x82"


def block(seed: int, size: int, newlines: bool = True) -> bytes:
    """``size`` reproducible bytes starting with NASTY; without newlines on request."""
    data = (NASTY + random.Random(seed).randbytes(size))[:size]
    return data if newlines else data.replace(b"\n", b"\r")


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def interleave(out: bytes, err: bytes) -> None:
    """Writes both streams in alternating, uneven pieces."""
    steps = random.Random(0)
    pending = {1: memoryview(out), 2: memoryview(err)}
    while any(pending.values()):
        for fd, data in pending.items():
            size = steps.randint(1, 70000)
            write_all(fd, data[:size])
            pending[fd] = data[size:]


def line_pieces(total: int, piece: int = 1 << 20):
    """One unterminated line of ``total`` bytes, generated a piece at a time (bounded memory)."""
    for index in range(total // piece):
        yield block(index, piece, newlines=False)


def endless(fd: int, piece: int = 1 << 16) -> None:
    """Writes ``block(0, piece)``, ``block(1, piece)``, ... until killed."""
    index = 0
    while True:
        write_all(fd, block(index, piece))
        index += 1


def child_command(call: str) -> list[str]:
    """A Python child that runs ``call`` (an expression over this module, named ``p``)."""
    here = str(Path(__file__).resolve().parent)
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); import payloads as p; {call}"]
