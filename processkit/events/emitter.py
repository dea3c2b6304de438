"""The JSONL lifecycle writer: one compact line per event, written and flushed as it happens.

A write failure is reported once on stderr and then poisons the emitter: later events are
dropped, the run and its exit code carry on (docs/events.md §1). A JSONL that is a pipe or a FIFO
is written without blocking: a reader that takes nothing for STALL_SECONDS counts as a failed
write, so a stalled reader can delay the run, never hang it. On a host that carries other runs
(``defer``: the API's runner service, whose one loop carries every call of its caller) the run
does not wait in the write: what the pipe cannot take now waits in the stream's backlog, in
order, and goes as the reader takes it: the pipe is watched on the run's loop for room while
anything waits (``defer`` is that loop), so a reader that waits for an event before it lets the
child go sees it as soon as it reads, not at the next event or the run's end. A reader that takes
nothing for STALL_SECONDS, or falls more than ``backlog.BACKLOG_MOST`` bytes behind, fails the
stream as the stalled write does (its one warning). The backlog goes in writes that each end at a
line boundary within PIPE_BUF (a longer line: alone), so each is atomic on a pipe as the
per-event write is: streams sharing one pipe never interleave inside a line, and a stream that
fails ends on a whole line; a line longer than PIPE_BUF goes only once the pipe is empty (``pipe_room``). That code,
which a plain run never needs, is ``events/backlog.py``, imported by the first write a pipe does
not take whole (or a deferred line longer than PIPE_BUF into a FIFO).
"""

from __future__ import annotations

import os
import select
import stat
import time

from ..diagnostics import warn_once
from ..errors import os_error_words
from ..jsontext import dumps, lossy_utf8
from ..native import hold_stream, let_stream_go, module
from ..safepath import open_unemptied

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from ..loop import Loop
    from ..native import StreamKey
    from .pipe_room import Watch


STALL_SECONDS = 2.0  # a reader that takes nothing for this long has stalled (events/backlog.py)
# A memory-backed stream gathers its events as objects only up to this weight (an event counts
# 1, a snapshot 1 more per member): past it, what was gathered is encoded and written, and every
# later event as it comes, so a job that snapshots a large tree often holds its stream as its
# memfd's bytes, as its capture is held, never as a growing list in the batch's heap.
SPILL_WEIGHT = 2048
# The longest line a stream's readers read (``bounded.LINE_BYTES``, not imported: a plain run
# loads no ``bounded``); a longer event is fitted (``events/fit.py``).
LINE_MOST = 1 << 20
# ``open_stream``'s refusal: a lock of a run's kind (its open file description's) or a program's
# (``fcntl``, ``lockf``) clash alike, and neither says whose it is.
HELD = "a process holds a lock on it: another run writing it, or a program that locked it (one stream, one run)"


def open_stream(
    path: str, *, readable: bool = False, locked: bool = True, key: StreamKey | None = None
) -> tuple[int, os.stat_result]:
    """The stream's file at ``path``, opened to write under ``safepath``'s rules (``readable``: as
    ``open_for_writing``'s), and what ``fstat`` found it. A regular file is emptied only once this run holds it
    alone: by an exclusive lock of its open file description (``F_OFD_SETLK``, the whole file), taken without
    waiting and held until the stream is closed (``Emitter.close``) or the run ends: a second run given the same
    ``--jsonl`` meanwhile is refused (``native.Held``, before anything is written or emptied), never truncating or
    interleaving with the first's lines. Its own kind of lock: a ``flock`` on the file (``flock FILE run --jsonl
    FILE``) never clashes with it, nor a read lock (anyone's who may read it): the file is then written unlocked,
    guarded by ``key`` instead (``registry.stream_guard``). A file the caller handed over (the path a descriptor
    link the kernel followed: ``/dev/stdout``, ``/dev/fd/N``), a device, a pipe or a FIFO is shared as before, not
    locked: sharing it is the caller's choice; a file system that cannot lock is written unlocked. ``locked`` False:
    a carrier guards the file itself (a batch's job stream, ``RunContext.stream_guarded``)."""
    fd, created = open_unemptied(path, readable=readable)
    try:
        found = os.fstat(fd)
        if stat.S_ISREG(found.st_mode):
            if created is not None and locked:  # named, not handed over
                module()  # the lock through the C module, which a run loads anyway (its spawn): not fcntl
                hold_stream(fd, found, HELD, key)
            if not created:  # False (found) or None (handed over): each open empties a regular file
                os.ftruncate(fd, 0)  # what an earlier run left, once none writes it
    except BaseException:
        os.close(fd)
        if key is not None:
            key.close()
        raise
    return fd, found


def utc_timestamp(ns: int | None = None, digits: int = 3) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` with milliseconds truncated (``digits`` 6: microseconds);
    pre-epoch clocks clamp to 0."""
    if ns is None:
        ns = time.time_ns()
    if ns < 0:
        ns = 0
    if digits == 3:
        millisecond = ns // 1_000_000
        last = _MILLISECOND[0]
        if millisecond == last[0]:  # a run's events come in bursts within one millisecond
            return last[1]
    seconds, rest = divmod(ns, 1_000_000_000)
    second = _SECOND[0]
    if seconds != second[0]:  # a run's events mostly share their second: formatted once
        second = _SECOND[0] = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + ".")
    if digits == 3:
        text = f"{second[1]}{rest // 1_000_000:03d}Z"
        _MILLISECOND[0] = (millisecond, text)
        return text
    return f"{second[1]}{rest // 10 ** (9 - digits):0{digits}d}Z"


# The last second and the last millisecond formatted, each with its text, replaced as one pair
# (threads share them).
_SECOND: list = [(-1, "")]
_MILLISECOND: list = [(-1, "")]


def encode(record: dict) -> bytes:
    """One compact line of UTF-8, at most LINE_MOST long with its newline (``fit``). Text decoded from OS bytes (a
    path) is rendered lossily, as the reference does (``jsontext.lossy_utf8``): what is not UTF-8
    becomes U+FFFD instead of invalidating the line."""
    line = _utf8(record)
    if len(line) >= LINE_MOST:  # the reader counts the newline written after it
        from .fit import fitted

        return fitted(record, line, _utf8)
    return line


def _utf8(record: dict) -> bytes:
    return lossy_utf8(dumps(record))


if TYPE_CHECKING:

    class Written(Protocol):
        """An event as the emitter takes it: ``events.types.Event`` (not imported here, since
        ``types`` stamps its events with ``utc_timestamp`` from this module)."""

        @property
        def name(self) -> str | None: ...  # the type's (None: an unknown event)

        @property
        def time(self) -> str | None: ...

        def to_json(self, stamp: str | None = None) -> dict: ...


class Emitter:
    withheld = False  # a run's whose --jsonl another run holds: written nowhere (``engine.runner._without_stream``)

    def __init__(
        self,
        path: str,
        remember: tuple[str, ...] = (),
        fd: int | None = None,
        lent: bool = False,
        defer: Loop | None = None,
        readable: bool = False,
        said: set[tuple] | None = None,
        locked: bool = True,
        key: StreamKey | None = None,
    ):
        """Create or truncate ``path``, never through a path another user controls (``safepath``); raises OSError
        when it cannot be opened. ``remember``: the event types whose last event written whole stays in
        ``remembered``, as the object written (a batch's line, without reading the file back). A stream to
        ``os.devnull`` that keeps nothing (each of ``bench``'s runs) is not opened, and its events are dropped
        before they are formatted: nothing could read them. ``fd``: a memory-backed file to write instead (a batch's
        memfd), closed here; no other process can read it while the run goes on, so its events are gathered, and
        encoded and written at ``close`` only if it keeps them (a passing ``--keep failed`` job's are dropped
        unread), or once they weigh more than ``SPILL_WEIGHT``. ``lent``: ``fd`` stays its giver's, never closed
        here (a batch's memfd, kept for its next attempt). ``defer``: the run's loop, on a host that carries other
        runs: what a pipe cannot take now waits in a backlog instead of the write, and goes when the loop sees the
        pipe writable (module docstring). ``readable``: a file made here is opened to read too, for a carrier that
        reads it back (``reader``). ``said``: the host's warnings said once (``Host.said``): the stream's failure
        among them. ``locked``, ``key``: ``open_stream``'s (the key let go at ``close``)."""
        self._poisoned = fd is None and path == os.devnull and not remember
        self.failure: str | None = None  # why writing stopped, once it has
        self._remember = remember
        self._said = said
        self.remembered: dict[str, dict] = {}
        self._fd = -1
        self._gathered: list | None = None  # a memory-backed stream's records and events, until close (``emit``)
        self._weight = 0  # of what was gathered: SPILL_WEIGHT
        self._lent = lent
        self.key = key
        self._pipe: bool | None = None  # whether ``fd`` is a pipe or FIFO, once a long line asked
        self._defer = defer
        self._watch: Watch | None = None  # the fd on ``defer``'s loop while a backlog waits
        self._backlog = bytearray()  # a deferred stream's bytes its pipe has not taken yet
        self._taken_at = 0.0  # when the pipe last took any of them (``time.monotonic``)
        self.sent = 0  # the bytes written so far: a named file's size as this run left it
        # (st_dev, st_ino) of the regular file opened by its path: a capture file that is it
        # fails the capture setup (``capture.open_targets``)
        self.identity: tuple[int, int] | None = None
        if self._poisoned:
            return
        if fd is not None:
            self._fd = fd
            self._gathered = []
            return
        self._fd, found = open_stream(path, readable=readable, locked=locked, key=key)
        if stat.S_ISREG(found.st_mode):
            self.identity = (found.st_dev, found.st_ino)
        else:
            os.set_blocking(self._fd, False)  # opened by path: the description is ours alone

    def reader(self) -> int:
        """A descriptor the carrier reads the named stream's file back through (``readback``:
        the file this run wrote, whatever is at its path now, whatever its mode)."""
        from ..readback import NO_FILE, reader  # a carrier's read-back only: a plain run loads none

        return reader(self._fd) if self._fd >= 0 else NO_FILE

    @property
    def writing(self) -> bool:
        """Whether an event emitted now would be written: a caller may skip reading what only an
        event would show (the members at the spawn) when it would not."""
        return not self._poisoned

    @property
    def records(self) -> list[dict] | None:
        """A memory-backed stream's events as objects (``to_json``'s), in order, while none was
        encoded (None once it spilled or was written): a carrier that needs the events, not their
        bytes (the API's runner service), takes these and has the stream dropped unwritten."""
        gathered = self._gathered
        if gathered is None:
            return None
        from .gathered import records

        return records(gathered, utc_timestamp)

    @property
    def gathered(self) -> list | None:
        """A memory-backed stream's events as they were gathered, while none was encoded (None
        once it spilled or was written): each a record (a type ``remember`` names) or an
        ``(event, stamp)`` pair, the time it was emitted for an event that had none, as text (kept
        as the clock's reading until then: ``gathered._stamp``). A carrier
        that sends the events on in its own form (the API's runner service) makes it from these,
        not from records it would only take apart again."""
        gathered = self._gathered
        if gathered is None:
            return None
        from .gathered import stamped

        return [stamped(item, utc_timestamp) for item in gathered]

    def emit(self, event: Written) -> None:
        """Write one event (a ``processkit.events.types`` instance), stamped now if it has no time.
        A held stream gathers an event of a type it does not remember as itself, with the clock
        read when it was emitted, and makes it a record (its time formatted from that reading)
        only if the stream is kept (``close``): a passing ``--keep failed`` job's five such
        events (``run_started``, ``members_snapshot``, ``resource_summary``, ``cleanup_started``,
        ``cleanup_finished``; the others it remembers, ``job_lines.LINE_EVENTS``) are never
        made into records, nor given a text time, to be dropped. The record made then is the
        one made now would be, so the bytes are the same."""
        if self._poisoned:
            return
        gathered = self._gathered
        if gathered is None:
            record = event.to_json()
            try:
                self._write(encode(record) + b"\n")
            except (OSError, ValueError, TypeError) as exc:
                self._fail(exc)
                return
        else:
            # What was just gathered is weighed here (``SPILL_WEIGHT``), not in a call of its
            # own: past the bound, what was gathered is written (``_spill``), and every later
            # event as it comes.
            name = getattr(event, "name", None)
            kept_as_event = bool(name) and name not in self._remember  # an ``events.base.Event``
            if kept_as_event:
                gathered.append((event, None if event.time is not None else time.time_ns()))
                members = getattr(event, "members", None)
            else:
                record = event.to_json()
                gathered.append(record)
                members = record.get("members")
            self._weight += 1 + (len(members) if type(members) is list else 0)
            if self._weight > SPILL_WEIGHT:
                self._spill(gathered)
                return  # written, and remembered as it was (``gathered.write``)
            if kept_as_event:
                return
        if record["event"] in self._remember:
            self.remembered[record["event"]] = record

    def _spill(self, gathered: list) -> None:
        """What was gathered weighs more than ``SPILL_WEIGHT``: written now, and every later
        event as it comes."""
        self._gathered = None
        from .gathered import write

        write(self, gathered, encode, utc_timestamp)

    def _fail(self, exc: Exception) -> None:
        self._poisoned = True
        self._backlog.clear()
        self._unwatch()
        # the reference's words: what failed, then why (a system error with its number)
        if isinstance(exc, OSError):
            reason = f"could not write a JSONL event: {os_error_words(exc)}"
        else:
            reason = f"could not serialize a JSONL event: {exc}"
        self.failure = reason
        warn_once(self._said, f"JSONL event logging disabled: {reason}")

    def _write(self, data: bytes) -> None:
        if self._backlog or (len(data) > select.PIPE_BUF and self._defer is not None and self._fifo()):
            # behind its reader already (after what waits, in order), or into a pipe past PIPE_BUF:
            # in the backlog's whole lines, never cut where the pipe fills (pipe_room)
            from .backlog import append

            append(self, data, STALL_SECONDS)
            return
        try:
            written = os.write(self._fd, data)  # the whole line, but for a pipe that is full
        except BlockingIOError:
            written = 0
        self.sent += written
        if written < len(data):
            from .backlog import rest

            rest(self, memoryview(data)[written:], STALL_SECONDS)

    def _fifo(self) -> bool:
        if self._pipe is None:
            self._pipe = stat.S_ISFIFO(os.fstat(self._fd).st_mode)
        return self._pipe

    def _unwatch(self) -> None:
        if self._watch is not None:
            self._watch.off()

    def drained(self) -> bool:
        """Whether nothing waits in the backlog any more (all written, or the stream failed): the
        ended run waits on its host's loop for this (``engine.runner``), the other runs going on."""
        if not self._backlog:
            return True
        from .backlog import drain

        return drain(self, STALL_SECONDS)

    def close(self, keep: bool = True) -> None:
        """Encode and write what was gathered unless ``keep`` is False (a line that did not reach
        the file is not ``kept``), then close."""
        gathered, self._gathered = self._gathered, None
        if gathered and keep:
            from .gathered import write

            write(self, gathered, encode, utc_timestamp)
        self._unwatch()  # before the fd is closed, or its number is reused
        if self._backlog:
            from .backlog import finish

            try:
                finish(self, STALL_SECONDS)
            except OSError as exc:
                self._fail(exc)
        if self._fd >= 0:
            if not self._lent:
                if self.identity is not None:
                    let_stream_go(self._fd)  # now: a copy read back may outlive it
                os.close(self._fd)
            self._fd = -1
        if self.key is not None:
            self.key.close()
