"""Whether a manifest's job ids (and the run ids its jobs name) are each given once, decided in
memory that does not grow with the manifest: a million-line manifest is checked in the same
couple of MiB as a ten-line one.

A name is first looked up in a Bloom filter of fixed size: a name it has certainly not seen is
new (almost every one); a name it may have seen is kept as a candidate, exactly. Only when there
are candidates does the caller go over the names once more (``Names.recheck``): then each
candidate's first line is noted, and its second occurrence, if any, is the duplicate, named with
the line of the first. With 16 Mi bits and four probes, a million names leave a few thousand
candidates, a manifest of distinct names under ten thousand jobs almost never one.
"""

from __future__ import annotations

import hashlib

BITS = 1 << 24  # 2 MiB of filter: allocated zeroed, so only the pages a name touched are resident
PROBES = 4


class Names:
    """The names seen so far, of several kinds (``id``, ``run_id``), in one filter."""

    __slots__ = ("_bits", "candidates")

    def __init__(self) -> None:
        self._bits = bytearray(BITS // 8)
        self.candidates: set[tuple[str, str]] = set()  # (kind, name) the filter may have seen

    def add(self, kind: str, name: str) -> None:
        """Note ``name``: a candidate when the filter may have seen it already."""
        if self.noted(kind, name):
            self.candidates.add((kind, name))

    def noted(self, kind: str, name: str, note: bool = True) -> bool:
        """Note ``name`` (unless not ``note``: only asked); whether the filter may have seen it
        before (False: it certainly had not)."""
        digest = hashlib.blake2b(f"{kind}\0{name}".encode("utf-8", "surrogatepass"), digest_size=16).digest()
        first = int.from_bytes(digest[:8], "little")
        step = int.from_bytes(digest[8:], "little") | 1
        bits = self._bits
        seen = True
        for probe in range(PROBES):
            bit = (first + probe * step) % BITS
            byte, mask = bit >> 3, 1 << (bit & 7)
            if not bits[byte] & mask:
                seen = False
                if note:
                    bits[byte] |= mask
        return seen

    def recheck(self) -> Recheck:
        """The exact check of the candidates, over the names once more in the same order."""
        return Recheck(self.candidates)


class Recheck:
    """The second look: ``first`` returns the line a candidate was first given on when this is
    its second occurrence (the duplicate), else None."""

    __slots__ = ("_candidates", "_lines")

    def __init__(self, candidates: set[tuple[str, str]]):
        self._candidates = candidates
        self._lines: dict[tuple[str, str], int] = {}

    def first(self, kind: str, name: str, number: int) -> int | None:
        key = (kind, name)
        if key not in self._candidates:
            return None
        earlier = self._lines.get(key)
        if earlier is None:
            self._lines[key] = number
        return earlier
