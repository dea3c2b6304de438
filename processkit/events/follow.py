"""Reading a run's JSONL while its runner may still write it: the one follower ``events --follow``
and the Python API both read through, with one rule for the end of a stream.

The stream is untrusted bytes, read through ``events.reader``: a line is handed out once its
newline has arrived. A follower's stream is over:

- at its first complete, schema-valid ``runner_exit`` line (``ended``): nothing after it is
  handed out;
- or once nothing can write it any more (``writer_gone()``) and it has not grown for ``settle``
  seconds (a registered runner unregisters just before its last line): what it holds then is
  all there is, an unterminated last line (a runner killed mid-write) included, and ``gone``
  says it ended without ``runner_exit``;
- once the file no longer starts as it did (``replaced``): a new run truncated it and writes its
  own stream there (a retried CI step reusing the ``--jsonl`` of a killed one), so the run
  followed writes nothing more; what the reader took is all it wrote, and none of the new
  stream's lines is handed out (``gone`` says it ended without ``runner_exit``);
- a pipe's, at its end of file.

Without ``writer_gone`` the stream is read as it is, not followed: every line to the file's
current end (or the pipe's EOF), also any after a ``runner_exit``, the unterminated last one
included. The file is opened once, so it can be read to its end even after its name was removed.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable

from ..bounded import EVENTS_STREAM
from ..text import escape_unsafe, sanitize
from . import names_run
from .reader import Line, LineSplitter
from .types import Event, from_json
from .validate import event_validator

READ_CHUNK = 64 * 1024
DRAIN_BYTES = 4 << 20  # read at most this much a call, so a large file is split a part at a time
_NULS = bytes(READ_CHUNK)  # a whole read of NUL bytes: no stream's data, perhaps a sparse file's hole
HEAD_BYTES = 4096  # a followed file's first bytes, kept: another run's stream never starts with them


class Follower:
    """Hands out the lines of ``path`` completed since the last call (``read`` for a file,
    ``feed`` for a pipe's data); ``done`` once no more can come. ``fd``, when given, is the
    stream already open (its owner closes it); else ``path`` is opened at the first read, and
    a file that does not exist yet reads as empty. ``run_id``: ``path`` is the stream that run's
    record names, so another user's regular file there is refused (``pathtrust.check_run_stream``,
    when the follower opens it), and so is a stream whose first ``run_started`` names another
    run (``names_run``): nothing from that line on is handed out, and the lines before it
    (none a ``run_started``) may have been (``pathtrust.ForeignStream``, an OSError).
    ``previous``: the (st_dev, st_ino) of the file at ``path`` before the run was asked for (and,
    third, its first HEAD_BYTES bytes then: a stream starting with them is that earlier run's,
    even one of the same run id), which
    may still hold an earlier run's stream that the run's runner is yet to empty (the API's
    ``start``, which follows a ``jsonl=`` it reused before its runner has opened it): in that
    file, a first ``run_started`` naming another run is read again from the start while the
    writer lives, and refused only once it is gone; another file is judged at once. Content
    there that is no run's stream (no ``run_started``: a ``spawn_failed`` run's, a line that is not
    JSON) neither ends the stream at its ``runner_exit`` nor at its emptying while the writer
    lives: the file is then read again from its start."""

    def __init__(
        self,
        path: str,
        writer_gone: Callable[[], bool] | None = None,
        *,
        settle: float = 0.0,
        fd: int | None = None,
        run_id: str | None = None,
        previous: tuple | None = None,
    ):
        self.path = path
        self.done = False
        self.ended = False  # a valid runner_exit was read
        self.gone = False  # followed to its end without one: nothing could write it any more
        self.replaced = False  # ... because the file was emptied under the reader: another run's now
        self._head: bytes | None = None  # a followed file's first bytes, once read
        self._writer_gone = writer_gone
        self._settle = settle
        self._quiet_since: float | None = None
        self._fd = fd
        self._owned = fd is None
        self._run_id = run_id
        self._previous = previous
        self._whose: bool | None = None  # the first run_started's names_run, once read
        self._splitter = LineSplitter()
        self.more = False  # the last read stopped at DRAIN_BYTES: read again at once

    @property
    def following(self) -> bool:
        return self._writer_gone is not None

    def read(self) -> list[Line]:
        """A file's lines completed since the last call; raises OSError when it cannot be read."""
        if self.done:
            return []
        writer_gone = self._writer_gone
        gone = writer_gone is None or writer_gone()  # asked before reading: no line is missed
        got, lines = self._drain(alive=not gone)
        if self.replaced:  # lines: the run's own, read before the file was emptied; none of the new stream's
            lines = self._take(lines, alive=not gone)
            if self.done:  # its runner_exit among them
                return lines
            self.gone = True
            return lines + self._finish()
        now = time.monotonic()
        if got or not gone or self._quiet_since is None:
            self._quiet_since = now
        lines = self._take(lines, alive=not gone)
        settled = not self.following or now - self._quiet_since >= self._settle  # a read as it is: at its end
        if not self.done and gone and not self.more and settled:
            self.gone = self.following and not self.ended
            lines += self._finish()
        return lines

    def feed(self, data: bytes) -> list[Line]:
        """A pipe's lines completed by ``data``; ``b""`` is its end of file."""
        if self.done:
            return []
        if data:
            return self._take(self._splitter.feed(data))
        return self._finish()

    def read_events(self) -> list[Event]:
        """``read()``'s lines that are JSON objects, as typed events (the rest is skipped)."""
        return [from_json(record) for line in self.read() if (record := line.event) is not None]

    def close(self) -> None:
        if self._fd is not None and self._owned:
            os.close(self._fd)
        self._fd = None

    def _finish(self) -> list[Line]:
        self.done = True
        return self._take(self._splitter.end())

    def _drain(self, alive: bool = False) -> tuple[bool, list[Line]]:
        """Whether the file held anything past the last read, and the lines it completed: up to
        DRAIN_BYTES read (``more`` says if that cut it), a sparse file's holes counted, not read.
        A followed file's chunk is taken once its start, looked at after the read, is still the
        one it had: where the file was emptied between two reads, the chunks before are the run's
        (an unterminated last line among them, handed out at the end), the one after is dropped.
        ``alive``: the writer lived before the read."""
        if self._fd is None:
            try:
                self._fd = open_stream(self.path, self._run_id)
            except FileNotFoundError:
                return False, []
        fd = self._fd
        lines: list[Line] = []
        size = 0
        if self._emptied(fd) and not self._restarted(fd, alive):
            return False, lines
        while size < DRAIN_BYTES and (chunk := os.read(fd, READ_CHUNK)):
            if not size and self.following and self._head is None:  # read from the file's start
                self._head = chunk[:HEAD_BYTES]  # as read: a pread after could see another run's
            elif self._emptied(fd):  # since the last read: this chunk may be the new stream's
                self.more = False  # those before it were the run's, taken
                if self._restarted(fd, alive):
                    return False, []
                if self._whose is None and self._in_earlier_file():  # perhaps an earlier run's, never judged
                    self._splitter = LineSplitter()
                    return False, []
                return size > 0, lines
            lines += self._splitter.feed(chunk)
            size += len(chunk)
            if chunk == _NULS:  # perhaps a sparse file's hole: its length is no time to read
                lines += self._splitter.skip(_past_hole(fd))
        self.more = size >= DRAIN_BYTES
        return size > 0, lines

    def _emptied(self, fd: int) -> bool:
        """Whether a followed file no longer starts with the bytes it first had (``replaced``): it was
        truncated, and perhaps written again by another run, whose stream would be read from the
        middle at this reader's offset. A writer only appends, so its first bytes never change."""
        head = self._head
        if head is not None and not self.replaced:
            self.replaced = os.pread(fd, len(head), 0) != head
        return self.replaced

    def _restarted(self, fd: int, alive: bool) -> bool:
        """Whether an emptied file is the run's own start: the ``previous`` file, its earlier
        content no run's stream (no ``run_started`` read: a ``spawn_failed`` first, a line that is
        not JSON), emptied while the writer lives, is the runner beginning its stream there; it
        is read again from its start."""
        if not (alive and self._whose is None and self._in_earlier_file()):
            return False
        os.lseek(fd, 0, os.SEEK_SET)
        self._splitter = LineSplitter()
        self._head = None
        self.replaced = self.ended = self.more = False
        return True

    def _take(self, lines: list[Line], alive: bool = False) -> list[Line]:
        """``lines`` as handed out; ``alive``: the writer lived when they were read."""
        taken = []
        for line in lines:
            if self.ended and self.following:
                break
            event = line.event
            if (
                self._whose is None
                and self._run_id is not None
                and event is not None
                and self._judge(event, self._run_id, alive)
            ):
                return []  # a previous run's stream, not emptied yet: read again from its start
            taken.append(line)
            if not self.ended and event is not None and event.get("event") == "runner_exit":
                self.ended = event_validator().is_valid(event)  # only a complete, valid one ends a stream
        if self.ended and self.following and not (alive and self._whose is None and self._in_earlier_file()):
            self.done = True  # else perhaps the earlier file's runner_exit: over once the writer is gone
        return taken

    def _in_earlier_file(self) -> bool:
        return self._previous is not None and self._fd is not None and self._earlier_file(self._fd)

    def _earlier_file(self, fd: int) -> bool:
        """Whether ``fd`` is the file ``previous`` names, which the runner is to empty."""
        found = os.fstat(fd)
        return self._previous is not None and (found.st_dev, found.st_ino) == self._previous[:2]

    def _stale(self) -> bool:
        """Whether the stream read starts as the ``previous`` file did before the run was asked for
        (its third item, that file's first bytes): an earlier run's, of the same run id too, that
        the runner is yet to empty. Two runs' streams never start alike: each first line names
        its own root pid and start time. Whole first lines are compared (or all HEAD_BYTES of one
        longer): a first line caught half-written before the run shares its start with another's."""
        earlier = self._previous[2] if self._previous is not None and len(self._previous) > 2 else b""
        end = earlier.find(b"\n") + 1
        line = earlier[:end] if end else earlier if len(earlier) >= HEAD_BYTES else b""
        return bool(line) and (self._head or b"").startswith(line) and self._in_earlier_file()

    def _judge(self, event: dict, run_id: str, alive: bool) -> bool:
        """Raises ForeignStream at a first ``run_started`` that names another run; nothing more
        of that stream is handed out. True (nothing raised): it is a ``previous`` run's stream
        read while its writer lived (``alive``, asked before the read: one asked now could have
        ended since, having emptied the file and written its own), and the next read starts
        again from the file's start."""
        whose = names_run(event, run_id)
        fd = self._fd
        stale = bool(whose) and self._stale()  # this run's id, but the earlier run's stream (a rerun under a fixed id)
        if stale:
            whose = False
        if whose is False and alive and self._previous and fd is not None and self._earlier_file(fd):
            os.lseek(fd, 0, os.SEEK_SET)
            self._splitter = LineSplitter()
            self._head = None  # the earlier run's: the runner is yet to empty the file
            self.ended = self.more = False
            return True
        self._whose = whose
        if self._whose is False:
            from ..pathtrust import ForeignStream

            self.done = True
            named = sanitize(str(event.get("run_id")))
            which = "is an earlier run's" if stale else f"names run `{named}`, not `{run_id}`"
            said = f"its stream `{self.path}` holds another run's events: its first run_started {which}"
            raise ForeignStream(escape_unsafe(said))  # a path is shown as the CLI's line shows it
        return False


def open_stream(path: str, run_id: str | None = None) -> int:
    """``path`` opened as an event stream is read (``EVENTS_STREAM``; another user's link on the
    way is refused): the one open of ``events`` and of a follower. With ``run_id``, ``path`` is the
    stream that run's record names, and another user's regular file there is refused
    (``pathtrust.check_run_stream``). Raises OSError (``ForeignStream`` included) or
    ``bounded.InputError``."""
    from ..userfiles import open_judged  # imported here: a follower handed its descriptor walks nothing

    fd = open_judged(path, EVENTS_STREAM)
    if run_id is not None:
        from ..pathtrust import check_run_stream

        try:
            check_run_stream(fd, f"its stream `{path}`")
        except OSError:
            os.close(fd)
            raise
    return fd


def _past_hole(fd: int) -> int:
    """At a hole of a sparse file (a size set with ``truncate``, no data written): how many NULs
    it has from the offset on, the offset moved past them, so a 15 TiB hole (36 hours to read, at
    8.5 s a GiB) is passed over at once. Never more than the hole has: at the end of the file, the
    size taken before the look is where the hole ended (what is appended since is read; a file
    cut short before that size was taken gives none, one cut between the two may be passed over
    up to the size taken). 0 where holes cannot be found (a pipe, a file system without)."""
    try:
        here = os.lseek(fd, 0, os.SEEK_CUR)
        size = os.fstat(fd).st_size
        try:
            there = os.lseek(fd, here, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                return 0
            there = os.lseek(fd, max(here, size), os.SEEK_SET)  # a hole to the end, as it was
    except OSError:
        return 0
    return there - here


def read_all(path: str, *, run_id: str | None = None) -> list[Event]:
    """Every event of a finished stream up to its ``runner_exit`` (none when it cannot be read,
    nor, with ``run_id``, when the follower refuses it as that run's)."""
    follower = Follower(path, lambda: True, run_id=run_id)
    events: list[Event] = []
    try:
        while not follower.done:
            events += follower.read_events()
        return events
    except (OSError, ValueError):  # ValueError: bounded.InputError, not a stream it takes
        return []
    finally:
        follower.close()
