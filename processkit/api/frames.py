"""Frames reassembled from what a stream socket gives (``api.wire``'s framing: a 4-byte
big-endian length, the writer's mark, then a pickle), with the descriptors each brought. Apart
from ``wire`` because it is the reading side's own state: what is buffered, from which stream
offset, and which descriptors wait for which frame."""

from __future__ import annotations

import array
import os
import pickle
import socket
import struct

HEADER = struct.Struct(">I")
CALL_ID = struct.Struct(">Q")  # after the mark: the frame's request id in clear (``Dropped``)
CUT_SHORT = "its request reached the runner service cut short"


class Dropped:
    """A frame of the caller's the service read but cannot act on, in the place of its message:
    ``rid`` (its id in clear, None when the frame was cut before it) is answered with a failure
    saying ``why`` (``serve.readable``), so its call ends and every other goes on. ``unheld``:
    more than the service could hold (a limit of the caller's, not the runner's own failure)."""

    __slots__ = ("rid", "why", "unheld")

    def __init__(self, rid: int | None, why: str, unheld: bool = False) -> None:
        self.rid, self.why, self.unheld = rid, why, unheld


class Frames:
    """Reassembles frames from what a socket gives, in order, each with the descriptors that came
    with its own bytes. ``broken``: bytes were taken off the socket and lost before they were in
    the buffer (a signal handler raised as ``receive`` ran): no later frame can be found, the
    stream is given up. ``lenient``: a frame that is no pickle is skipped, its descriptors closed
    (the service's, reading its caller's); else (the caller's, whose service never writes one)
    its error is raised, as a handler's exception raised as a pickle was read is, never taken for
    a bad frame and the reply dropped.

    A frame's descriptors are the ``SCM_RIGHTS`` that came in a read whose last byte is one of
    its own: the kernel ends a read with the bytes its descriptors were sent with (bytes sent
    before them may come first in it, none after), and ``send`` sends them with a frame's first
    byte. Before, they waited in one line, and a request read after a frame that brought more
    than it named (one over ~32 KiB, read in several reads; one that did not unpickle) took that
    frame's rest as its child's streams.

    ``mark``: bytes each frame carries after its header (the service's, random, said in its hello
    on the private socket). The service's socket is the library's, but the caller's own code can
    write on it: a frame whose header claimed more bytes than were sent took the library's next
    frames, of every thread, as its own (their calls hung); one that claimed fewer made the rest
    of it a frame. Bytes where a frame should begin without the mark are passed over to the next
    mark (their descriptors closed): the library's frames are found again, never swallowed. And
    a frame whose header and mark are right but whose rest never comes (the caller's own code
    wrote part of one, then stalled or trickled) took the library's next frames as its rest, so
    every later call of every thread waited on it: a mark where a frame would begin inside
    another's length is the library's frame, the one around it is passed over (its descriptors
    closed); each byte is searched once (``_inner``). A pickle of the library's holds the
    caller's bytes (inline ``input=``, args, env): where they hold the mark (8 random bytes,
    2^-64 a position) its frame is cut so.

    With a mark, each frame's body begins with its request id in clear (``CALL_ID``), so that a
    frame the service cannot act on is answered, never left waiting: one that does not unpickle
    (a class the service cannot import, a pickle too deep), one cut short by a frame begun inside
    its length (the caller's bytes holding the mark), and one more than the service can hold
    (``give_up``: its bytes let go as they come, passed over to the next mark) each come out as a
    ``Dropped`` of their id: skipped unread, its call would wait for ever, and the last would end
    the service with every run it carried."""

    def __init__(self, lenient: bool = True, mark: bytes = b"") -> None:
        self._buffer = bytearray()
        self._at = 0  # the stream offset of the buffer's first byte
        # Descriptors no whole frame has yet: the stream offset of the last byte read with them, and them.
        self._arrived: list[tuple[int, list[int]]] = []
        self.broken = False
        self._lenient = lenient
        self.mark = mark
        self._looked = 0  # the stream offset up to which the frame begun has been searched for a mark (``_inner``)

    def feed(self, data: bytes, ancillary=()) -> list[tuple[object, list[int]]]:
        """Each frame ``data`` completes, with its descriptors (the taker closes what it does not keep)."""
        messages: list[tuple[object, list[int]]] = []
        try:
            self._buffer += data
        except MemoryError:  # the frame begun is more than this process can hold: let go, answered
            messages += self.give_up()
            self._buffer += data  # its rest, passed over to the next mark below
        got = rights(ancillary)
        if got:
            self._arrived.append((self._at + len(self._buffer) - 1, got))
        start, end = 0, len(self._buffer)
        mark, skip = self.mark, HEADER.size + len(self.mark)
        with memoryview(self._buffer) as view:  # each pickle read where it lies: no copy of a frame
            while end - start >= skip:
                if mark and view[start + HEADER.size : start + skip] != mark:  # to the next mark (see above)
                    found = self._buffer.find(mark, start + HEADER.size + 1, end)
                    start = end - skip + 1 if found < 0 else found - HEADER.size
                    close_all(self._tied(self._at + start))
                    continue
                (size,) = HEADER.unpack_from(view, start)
                stop = start + HEADER.size + size
                inner = self._inner(start + inner_from(mark), min(end, stop + skip - 1)) if mark else -1
                if inner >= 0:  # a frame begun inside this one's length: this one was cut short (see above)
                    messages.append((Dropped(self._call_id(start, inner - HEADER.size), CUT_SHORT), []))
                    start = inner - HEADER.size
                    close_all(self._tied(self._at + start))
                    continue
                if end < stop:
                    break
                fds = self._tied(self._at + start + HEADER.size + size) if self._arrived else []
                body = start + skip + (CALL_ID.size if mark else 0)
                with view[min(body, stop) : stop] as frame:
                    try:
                        messages.append((pickle.loads(frame), fds))
                    except Exception as exc:  # noqa: BLE001 - no pickle: answered by its id, the frames after it still read
                        close_all(fds)
                        if not self._lenient:
                            raise
                        unheld = isinstance(exc, MemoryError)  # the caller's limit, as ``give_up``'s
                        why = (
                            held_why(size)
                            if unheld
                            else f"the runner service could not read its request ({type(exc).__name__})"
                        )
                        messages.append((Dropped(self._call_id(start, stop), why, unheld), []))
                start += HEADER.size + size
        del self._buffer[:start]
        self._at += start
        return messages

    def _call_id(self, start: int, end: int) -> int | None:
        """The request id in clear of the frame at ``start`` in the buffer, None when it is not
        whole before ``end`` (or no mark, no id)."""
        at = start + HEADER.size + len(self.mark)
        return CALL_ID.unpack_from(self._buffer, at)[0] if self.mark and at + CALL_ID.size <= end else None

    def give_up(self) -> list[tuple[object, list[int]]]:
        """The frame begun let go whole, more than this process can hold (a ``MemoryError`` as it
        grew, or as a read for it was made): its ``Dropped``, and its bytes still to come passed
        over to the next mark. Only the service's (lenient, marked) reader gives one up; the
        caller's raises, as before."""
        if not (self._lenient and self.mark):
            raise MemoryError
        (size,) = HEADER.unpack_from(self._buffer) if len(self._buffer) >= HEADER.size else (0,)
        rid = (
            self._call_id(0, len(self._buffer))
            if self._buffer[HEADER.size : HEADER.size + len(self.mark)] == self.mark
            else None
        )
        self._at += len(self._buffer)
        self._buffer = bytearray()  # its memory given back, not only emptied
        close_all(self._tied(self._at))  # its descriptors (a child's pipe ends: held, its caller's reader never ended)
        return [(Dropped(rid, held_why(size), unheld=True), [])] if rid is not None else []

    def _inner(self, low: int, high: int) -> int:
        """Where the mark lies whole in the buffer between ``low`` and ``high`` (-1: nowhere); a
        frame read in many pieces has each of its bytes searched once, not once a piece."""
        found = self._buffer.find(self.mark, max(low, self._looked - self._at), high)
        if found < 0:
            self._looked = self._at + max(low, high - len(self.mark) + 1)
        return found

    def _tied(self, stop: int) -> list[int]:
        """The descriptors of the frame that ends at stream offset ``stop``."""
        fds: list[int] = []
        while self._arrived and self._arrived[0][0] < stop:
            fds += self._arrived.pop(0)[1]
        return fds

    def missing(self) -> int:
        """How many bytes the frame begun in the buffer still lacks (0 when none is begun); while
        its id in clear is not whole, only those up to it: a read for the rest that finds no room
        lets the frame go (``give_up``), and one with no id could not be answered."""
        if len(self._buffer) < HEADER.size + len(self.mark) or not self._buffer.startswith(self.mark, HEADER.size):
            return 0  # no frame begun: bytes passed over (never a read sized by their length)
        (size,) = HEADER.unpack_from(self._buffer)
        to_id = HEADER.size + len(self.mark) + CALL_ID.size - len(self._buffer)
        return to_id if to_id > 0 else max(0, HEADER.size + size - len(self._buffer))

    def close(self) -> None:
        """Close the descriptors of a frame that will never be whole (the stream ended)."""
        arrived, self._arrived = self._arrived, []
        for _, fds in arrived:
            close_all(fds)


def inner_from(mark: bytes) -> int:
    """Where in a frame a mark is first looked for as another frame's (``Frames._inner``): one
    whose header would begin past the frame's own mark."""
    return HEADER.size + len(mark) + HEADER.size


def cut_within(frame: bytearray, mark: bytes) -> bool:
    """Whether the service's reader will cut ``frame`` (``wire.framed``'s, with ``mark``) at a
    mark inside it (the caller's bytes holding it): known before it is sent, so nothing the
    service cannot tell apart from a later frame's goes with it (``api.sending``)."""
    return bool(mark) and frame.find(mark, inner_from(mark)) >= 0


def held_why(size: int) -> str:
    """Why a frame of ``size`` bytes was let go: more than the service could hold."""
    return f"its request ({size} bytes) is more than the runner service can hold"


def rights(ancillary) -> list[int]:
    """The descriptors a read's ancillary data brought (``SCM_RIGHTS``), now this process's."""
    got = array.array("i")
    for level, kind, cmsg in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got.frombytes(cmsg[: len(cmsg) - len(cmsg) % got.itemsize])
    return got.tolist()


def close_all(fds) -> None:
    """Close each of ``fds`` (one closed already is passed over)."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
