"""Text mode's decoding of a capture a cap cut: the file's bytes are the stream's kept ranges
(``CaptureInfo.kept``: the head, the tail, or both), and each cut may fall inside a character, at
a range's end (a head cut there) or at its start (a tail begun there). A character a cut split is
left out rather than refused; before, only a head's end was, so a ``capture_keep="tail"`` run
whose tail began inside a character raised UnicodeDecodeError and lost its result."""

from __future__ import annotations

import codecs

from ..text import whole_chars

_PROBE = 16  # bytes decoded to find a range's first whole character: a character is at most 4 here


def decode_kept(data: bytes, kept, seen: int, encoding: str, errors: str) -> str:
    """``data`` (the file's bytes, the ranges ``kept`` of a stream of ``seen`` bytes, in file
    order) as text, each range decoded on its own: its end is final only where the stream ended."""
    factory = codecs.getincrementaldecoder(encoding)
    name = codecs.lookup(encoding).name
    width = 4 if name.startswith("utf-32") else 2 if name.startswith("utf-16") else 1  # a code unit
    if not kept:
        return factory(errors).decode(data, final=True)
    parts, at, previous = [], 0, 0
    for start, end in kept:
        piece = data[at : at + (end - start)]
        at += end - start
        if start != previous:  # a cut before this range: skip the tail of a split character
            if name == "utf-8":  # its continuation bytes; any other byte is the stream's own
                piece = whole_chars(piece, head_cut=True)
            else:
                piece = piece[_first_whole(factory, piece, -start % width, width) :]
        parts.append(factory(errors).decode(piece, final=end >= seen))
        previous = end
    return "".join(parts)


def _first_whole(factory, piece: bytes, aligned: int, width: int) -> int:
    """Another encoding's split character: the fewest leading bytes whose skip makes the start
    decodable, from the first whole code unit (that one when none does: the bytes are then refused
    as the caller's ``errors`` says)."""
    for skip in range(aligned, aligned + 4, width):  # from the range's first whole code unit
        try:
            factory("strict").decode(piece[skip : skip + _PROBE], final=False)
        except UnicodeDecodeError:
            continue
        return skip
    return aligned
