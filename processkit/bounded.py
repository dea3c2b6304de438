"""Reading what a user names: the one way a file or stream given by name is read, so that no
input can make this process wait for ever or hold an unbounded amount in memory (threat model,
"Rule 3: every reader is bounded"; tests/test_bounded_readers.py scans the sources for readers
that bypass it).

Each kind of input has its ``Limits``: the longest line, the most bytes in all, and whether it
must be a regular file; JSON nests at most MAX_DEPTH deep in every one. A bound that is hit is an ``InputError`` naming the input,
the bound and, for a line, its number; the caller turns it into its own Failure (a manifest's is a
usage error, a stream's invalid input).

Facts about opening that force the shape here:

- ``open(O_RDONLY)`` of a FIFO waits until a writer opens it, and no timer ends that wait; with
  ``O_NONBLOCK`` it returns at once, and a read with no writer is an end of file. So every input is
  opened non-blocking, and only then checked for what it is (``fstat`` of the descriptor: what was
  checked is what is read).
- ``O_NOCTTY``: a terminal named as input never becomes this process's controlling terminal.
- ``/dev/zero`` is a character device whose reads never end and never hold a newline: every
  reader refuses a device by its type (``/dev/null`` aside); behind a pipe, a reader that takes
  streams stops at its total, or (``events``) skips the endless line in constant memory.
- ``json`` recurses once per nesting level, so 100k nested brackets raise ``RecursionError``;
  a value is checked for depth before it is decoded, and the bound is far below the interpreter's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from itertools import accumulate

from .plain import Frozen
from .text import sanitize

MiB = 1 << 20
LINE_BYTES = MiB  # the threat model's cap on one line of any JSONL input
BOM = b"\xef\xbb\xbf"  # an editor's mark first in a text file (RFC 8259 §8.1): the line readers drop it
MAX_DEPTH = 64  # arrays and objects inside each other; every document of ours nests under 8
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class Limits(Frozen):
    """The bounds of one kind of input: ``what`` names it in errors; ``total`` is the most bytes
    read in all (None: a stream consumed line by line, in constant memory); ``regular``: only a
    regular file is taken (else a pipe, a FIFO, a socket or ``/dev/null`` too)."""

    what: str
    line: int = LINE_BYTES
    total: int | None = None
    regular: bool = True
    nofollow: bool = False  # a link at the name itself is not followed (ELOOP, an OSError)


EVENTS_STREAM = Limits("events stream", total=None, regular=False)  # read and shown line by line
REPORT_STREAM = Limits("events stream", total=256 * MiB, regular=False)  # held whole for one page
REPORT_ENTRY = Limits("events stream", total=256 * MiB)  # a directory's entry: a regular file only
MANIFEST = Limits("manifest", total=256 * MiB, regular=False)
SUMMARY = Limits("batch summary", total=1024 * MiB)  # read line by line; only ids and codes kept
# A summary drawn as a page (``report DIR``, the batch's index) holds every job as an object of
# about 2 KB: with ``report.batch_model.PAGE_LINES`` this bounds the page's memory near 1 GB.
PAGE_SUMMARY = Limits("batch summary", total=256 * MiB)
USAGE_FILE = Limits("--usage-file", line=MiB, total=MiB)
BENCH_EXPORT = Limits("benchmark export", line=64 * MiB, total=64 * MiB)
DETACHED_JSONL = Limits("--jsonl stream")  # its head, read by run --detach for its copy's proof
REGISTRY_FILE = Limits("registry file", nofollow=True)  # records and tombstones: 64 KiB, checked by shape
CAPTURE_LAYOUT = Limits("capture layout", nofollow=True)  # capture-keep.json, beside a stream's capture
RUN_FILE = Limits("file the run left")  # a capture file the API reads back (as far as the run says)
EARLIER_STREAM = Limits("events stream")  # start's jsonl= file before the run: its head, to tell it from the run's
Opener = Callable[[str, Limits], int]  # path, limits -> a read-only descriptor judged by them


class InputError(ValueError):
    """An input that cannot be read within its bounds, or is not the kind of file its reader
    takes (``WrongKind``): the message names the input, the bound and the line."""


class WrongKind(InputError):
    """A directory, a device, or (where a regular file is needed) a FIFO or socket."""


class NotJSON(InputError):
    """A document that is not UTF-8 JSON at all (``load_file``)."""


class BadShape(ValueError):
    """JSON that decodes but is no value a reader takes: nested too deeply, a key given twice."""


def _human(size: int) -> str:
    return f"{size >> 20} MiB" if size >= MiB and size % MiB == 0 else f"{size} bytes"


def open_input(path: str, limits: Limits) -> int:
    """A read-only descriptor on ``path``, non-blocking; OSError when it cannot be opened, an
    InputError when it is a directory, or not a regular file where ``limits`` takes only one, or
    a device other than ``/dev/null`` (endless, like ``/dev/zero``, or a terminal)."""
    return checked(os.open(path, _OPEN_FLAGS | os.O_NOFOLLOW if limits.nofollow else _OPEN_FLAGS), path, limits)


def checked(fd: int, path: str, limits: Limits) -> int:
    """``fd``, read-only and non-blocking on ``path`` (``userfiles.open_named`` reaches it through
    ``safepath``'s walk), once ``fstat`` says it is what ``limits`` takes; else it is closed and
    the InputError says why."""
    try:
        found = os.fstat(fd)
        kind = _kind(found)
        if kind is None and limits.total is not None and found.st_size > limits.total:
            raise InputError(
                f"the {limits.what} {path} holds {found.st_size} bytes, more than {_human(limits.total)}, "
                "the most it may"
            )
        if kind is None or not limits.regular and (kind in ("a FIFO", "a socket") or is_null(found)):
            return fd
        why = "" if kind == "a directory" else ", not a regular file" if limits.regular else ", not a stream it takes"
        raise WrongKind(f"cannot read the {limits.what} {path}: it is {kind}{why}")
    except BaseException:
        os.close(fd)
        raise


def _kind(found: os.stat_result) -> str | None:
    """None for a regular file, else what it is, in words."""
    return file_kind(found.st_mode)


def file_kind(mode: int) -> str | None:
    """None for a regular file, else what it is, in words (``a FIFO``, ``a directory``, ...)."""
    if stat.S_ISREG(mode):
        return None
    for test, words in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return words
    return "not a regular file"


def is_null(found: os.stat_result) -> bool:
    """Whether a file is the null device (by its number, whatever its name): it reads as empty at once."""
    return stat.S_ISCHR(found.st_mode) and os.major(found.st_rdev) == 1 and os.minor(found.st_rdev) == 3


def never_waits(found: os.stat_result) -> bool:
    """Whether a read of this file comes to its end without waiting for a writer or a device: a
    regular file or the null device (an input a loop shared by other runs reads, a batch's env file)."""
    return stat.S_ISREG(found.st_mode) or is_null(found)


def blocking(fd: int) -> int:
    """``fd`` made blocking, for a reader that reads a pipe in order (a manifest on stdin)."""
    os.set_blocking(fd, True)
    return fd


def read_all(path: str, limits: Limits, opener: Opener = open_input) -> bytes:
    """The whole of ``path``, at most ``limits.total`` bytes (one more is an InputError), opened
    by ``opener`` (``userfiles.open_judged`` for a file a user named: walked, not followed)."""
    fd = opener(path, limits)
    with os.fdopen(blocking(fd), "rb") as handle:
        return read_stream(handle, path, limits)


def read_start(path: str, size: int, limits: Limits, opener: Opener = open_input) -> bytes:
    """The first ``size`` bytes of ``path`` (fewer when it is shorter), opened as ``read_all`` says."""
    fd = opener(path, limits.replace(total=None))
    with os.fdopen(blocking(fd), "rb") as handle:
        return handle.read(size)


def first_line(
    path: str, limit: int, limits: Limits, chunk: int, opener: Opener = open_input
) -> tuple[bytes | None, int]:
    """The first line of ``path``, its newline kept (None when none ends within ``limit`` bytes),
    and how many bytes were read for it: ``chunk`` at a time, never the rest of the file, so a
    stream's head is checked in the same time however long the stream has grown. ``opener``: as
    ``read_all``'s."""
    fd = blocking(opener(path, limits.replace(total=None)))
    try:
        data = bytearray()
        while len(data) < limit:
            piece = os.read(fd, min(chunk, limit - len(data)))
            if not piece:
                break
            end = piece.find(b"\n")
            data += piece
            if end >= 0:
                return bytes(data[: len(data) - len(piece) + end + 1]), len(data)
        return None, len(data)
    finally:
        os.close(fd)


def read_stream(handle, path: str, limits: Limits) -> bytes:
    """What an open binary stream holds, at most ``limits.total`` bytes (or one line's worth,
    for a kind with no total); one more is an InputError."""
    total = limits.total if limits.total is not None else limits.line
    data = handle.read(total + 1)
    if len(data) > total:
        raise InputError(f"the {limits.what} {path} is larger than {_human(total)}, the most it may hold")
    return data


def lines(handle, path: str, limits: Limits):
    """``(number, line)`` for each line of an open binary stream (its newline kept, numbered
    from 1), each at most ``limits.line`` bytes and all at most ``limits.total``: a bound hit is
    an InputError raised before the rest is read."""
    total = limits.total
    line_limit = limits.line
    read = 0
    number = 0
    readline = handle.readline
    while True:
        line = readline(line_limit + 1)
        if not line:
            return
        number += 1
        if len(line) > line_limit:
            raise _too_long(limits, number, path)
        read += len(line)
        if total is not None and read > total:
            raise _past_total(limits, number, path)
        yield number, line


class LineFeed:
    """The lines of a stream whose bytes are handed in as they come (a pipe read only when it is
    readable, so its reader never waits on it): ``feed`` returns ``(number, line)`` for each line
    it completed, as ``lines`` gives them, within the same bounds; the bytes of a line not ended
    yet are checked against them as they come, so no line grows past its bound while its newline
    is awaited. ``feed(b"")`` is the end of the stream (its last line may lack a newline)."""

    __slots__ = ("_path", "_limits", "_pending", "_number", "_read")

    def __init__(self, path: str, limits: Limits):
        self._path = path
        self._limits = limits
        self._pending = b""
        self._number = 0
        self._read = 0

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        limits = self._limits
        if data:
            found = (self._pending + data if self._pending else data).split(b"\n")
            self._pending = found.pop()
            found = [line + b"\n" for line in found]
        else:
            found = [self._pending] if self._pending else []
            self._pending = b""
        done = []
        for line in found:
            self._number += 1
            if len(line) > limits.line:
                raise _too_long(limits, self._number, self._path)
            self._read += len(line)
            if limits.total is not None and self._read > limits.total:
                raise _past_total(limits, self._number, self._path)
            done.append((self._number, line))
        pending = len(self._pending)
        if pending > limits.line:
            raise _too_long(limits, self._number + 1, self._path)
        if limits.total is not None and self._read + pending > limits.total:
            raise _past_total(limits, self._number + 1, self._path)
        return done


def _too_long(limits: Limits, number: int, path: str) -> InputError:
    return InputError(
        f"{limits.what} line {number} is longer than {_human(limits.line)}, the most a line may hold ({path})"
    )


def _past_total(limits: Limits, number: int, path: str) -> InputError:
    return InputError(
        f"{limits.what} line {number} goes past {_human(limits.total or 0)}, the most a {limits.what} may hold ({path})"
    )


def depth(text: str) -> int:
    """How deeply arrays and objects nest in the JSON ``text`` (outside its strings)."""
    import re  # not at module level: ``rundir``, on the run's path, reads through this module

    brackets = re.sub(r"[^\[\]{}]+", "", re.sub(r'"(?:[^"\\]|\\.)*"', "", text, flags=re.DOTALL))
    return max(accumulate(1 if ch in "[{" else -1 for ch in brackets), default=0)


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise BadShape(f"the key {sanitize(twice, 60)!r} is given twice")
    return found


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


_DECODERS: list = []  # made at the first use: ``json`` is kept off the run's path


def _decoder(unique_keys: bool):
    if not _DECODERS:
        import json

        _DECODERS.append(json.JSONDecoder(parse_constant=_reject_constant))
        _DECODERS.append(json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicates))
    return _DECODERS[unique_keys]


def loads(text: str, *, unique_keys: bool = False):
    """A JSON value, nested at most MAX_DEPTH deep (deeper is a ValueError saying so, decided
    before the decoder could recurse); ``NaN`` and ``Infinity`` are no JSON values, and with
    ``unique_keys`` neither is an object naming a key twice."""
    if text.count("[") + text.count("{") > MAX_DEPTH and depth(text) > MAX_DEPTH:
        raise BadShape(f"arrays and objects are nested more than {MAX_DEPTH} deep")
    return _decoder(unique_keys).decode(text)


def load_file(path: str, limits: Limits, *, unique_keys: bool = False, opener: Opener = open_input):
    """The one JSON document in ``path``, read within ``limits`` (opened as ``read_all`` says):
    an InputError when a bound is hit or it is not JSON (UTF-8) at all (with ``unique_keys``,
    when an object names a key twice)."""
    data = read_all(path, limits, opener)
    try:
        return loads(data.decode("utf-8"), unique_keys=unique_keys)
    except UnicodeDecodeError as exc:
        raise NotJSON(f"the {limits.what} {path} is not UTF-8 (byte {exc.start + 1})") from None
    except BadShape as exc:
        raise InputError(f"the {limits.what} {path}: {exc}") from None
    except ValueError as exc:
        raise NotJSON(f"the {limits.what} {path} is not JSON ({exc})") from None
