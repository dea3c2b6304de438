"""What a cap or a failed write cut of the capture files a run keeps, in one set of words: the
CLI's ``run`` says them on stderr and the API warns with them, each spelling the cap's option
as its caller names it (``--capture-max-bytes``, ``capture_max_bytes``); the batch's list and
JUnit file say the same reason beside a capture's path (``events.dropped.cut_note``)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence


class Cut:
    """Why a capture file holds less than its stream: the words, whole for where they are said,
    and whether it was a failed write (else the cap). A plain class, not a ``NamedTuple``: a
    ``run`` that cut its capture imports this module from the CLI, so its start-up bundle keeps
    it, and every later plain run loads it, where ``typing`` (and ``re``, ``enum``, ...) cost
    each about 40 % more start-up CPU (bench/README.md, the s70 figures)."""

    __slots__ = ("failed", "words")

    def __init__(self, words: str, failed: bool) -> None:
        self.words = words
        self.failed = failed


def reason(write_error, truncated, option: str, whose: str | None) -> Cut | None:
    """Why a capture file holds less than its stream, or None: a failed write (a full disk)
    first, since it cut the file short of the cap too, else the cap, ``option`` as its caller
    spells it. ``whose`` names the capture as a sentence's subject (``stdout's capture was cut
    at ...``); None, beside its path, says it as ``cut at ...`` (``a write to it failed``)."""
    if write_error:
        return Cut(f"a write to {whose or 'it'} failed", True)
    if truncated:
        return Cut(f"{whose} was cut at {option}" if whose else f"cut at {option}", False)
    return None


def capture_cuts(
    captured: Iterable[tuple[str, Mapping | None]], ended: str | None, option: str
) -> tuple[list[str], bool]:
    """One phrase per stream whose capture file (``output_captured``'s object for it) holds less
    than the stream, and whether a failed write is among them. A failed write (a full disk) is
    said first and always; a cut at the cap not for ``ended``, the stream whose overflow ended
    the run (its ``output_overflow``: 113's line says it)."""
    cut, failed = [], False
    for name, stream in captured:
        stream = stream or {}
        why = reason(stream.get("write_error"), stream.get("truncated"), option, f"{name}'s capture")
        if why and (why.failed or name != ended):
            held = f"{stream.get('path')} holds {_part(stream)} of its {stream.get('bytes_seen')} bytes"
            cut.append(f"{why.words}: {held}")
            failed = failed or why.failed
    return cut, failed


def _part(stream: Mapping) -> str:
    """How many of its stream's bytes a cut file holds, and which, where a ring capture kept the
    stream's end (``kept``: the stream ranges it holds, in file order): a tail's file holds the
    last bytes, a head-tail's the first and the last, where a head's holds the first."""
    written, seen = stream.get("bytes_written"), stream.get("bytes_seen")
    kept: Sequence[Sequence[int]] = stream.get("kept") or ()
    if len(kept) == 1 and kept[0][0] > 0 and kept[0][1] == seen:
        return f"the last {written}"
    if len(kept) == 2 and kept[0][0] == 0 and kept[1][1] == seen:
        return f"the first {kept[0][1]} and the last {kept[1][1] - kept[1][0]}"
    return f"{written}"
