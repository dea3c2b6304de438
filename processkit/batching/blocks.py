"""A checked manifest's jobs read again in blocks ahead of their start (``Manifest.__iter__``):
a block ends at ``READ_AHEAD`` jobs or once its lines pass ``BLOCK_BYTES`` of raw bytes, so a
manifest of small lines is parsed 32 lines at a time, while one of lines near the 1 MiB line
bound (each some 12 MiB of Python objects once parsed) holds one parsed job at a time."""

from __future__ import annotations

from ..errors import Failure

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import TypeVar

    Job = TypeVar("Job")  # a manifest's ``Job``: not imported, as manifest imports this module

READ_AHEAD = 32  # the jobs a batch reads from its manifest at a time, ahead of their start
BLOCK_BYTES = 64 * 1024  # ... and the raw line bytes after which a block ends sooner


def in_blocks(sized: Iterator[tuple[Job, int]]) -> Iterator[Job]:
    """The jobs of ``sized`` (each with its line's length in bytes), a block read before any of
    it is given on, and a Failure after the jobs read before it (so the same jobs start). Read
    one at a time between two runs, a line's parse found its code cold in the CPU's caches:
    32-48 µs of the batch's CPU against 13-16 µs in blocks (bench/README.md, "Batch per job
    (issue 49, batch55)"); a block of long lines ends on its bytes instead, since what a parsed
    job holds grows with its line, and the parse of such a line is long beside any cache miss."""
    block: list[Job] = []
    while True:
        failure: Failure | None = None
        full = False
        size = 0
        try:
            for job, length in sized:
                block.append(job)
                size += length
                if len(block) == READ_AHEAD or size >= BLOCK_BYTES:
                    full = True
                    break
        except Failure as exc:
            failure = exc
        yield from block
        if failure is not None:
            raise failure
        if not full:
            return
        block.clear()
