"""The framing between a calling process and its runner service (``api.service``, ``processkit.service``).

One private socketpair carries length-prefixed pickles: a 4-byte big-endian length, then the
pickled value (a tuple whose first item names the message); the caller's frames carry the
service's mark between the two (``Frames``). Both ends are the same program of
the same user, started by one another, so pickle's trust is not extended to anyone. Descriptors
(the caller's standard streams, a batch's own connection) travel beside a frame as
``SCM_RIGHTS``; a frame that carries some says how many.
"""

from __future__ import annotations

import array
import fcntl
import os
import pickle
import socket
import stat
import struct

from .frames import CALL_ID, HEADER, Frames, close_all, rights

MAX_FDS = 6  # the most descriptors any one frame carries (the caller's 0-2, and its own for the child's)
# A request's stand-ins, each replaced by the service with a place of its own: the events go to
# memory (a memfd), not a file, or (for a run followed live) to ``<scratch>/<run id>.jsonl`` in
# the service's scratch directory; the capture goes to that directory too; stdin is fed from the
# ``input=`` bytes the request carries (a memfd too), or from the caller's own memfd of a large
# one sent beside the request (``SCRATCH_INPUT_FD``). A service from before that took no such
# descriptor and fed the child the empty ``input``: this stand-in is a path no file can have
# (under a device, never "\0"-led: opening that raised ValueError, a 104), which such a service
# fails to open, a 111 naming it, never an empty stdin.
SCRATCH_MEMORY = "\0memory"
SCRATCH_FILE = "\0file"
SCRATCH_CAPTURE = "\0capture"
SCRATCH_INPUT = "\0input"
SCRATCH_INPUT_FD = "/dev/null/processkit: a large input= beside the request, which an older service cannot take"


def scratch_name(rid: int, suffix: str = "") -> str:
    """The name of request ``rid``'s file or directory in the service's scratch directory: the
    service's own name for it, never the run id (a name the caller chose, which may hold a
    ``/`` or ``..``: joined onto the scratch directory it could name any path)."""
    return f"r{int(rid)}{suffix}"


def read_back(
    source: int | str, *, follow: bool = True, most: int | None = None, failed: list[OSError] | None = None
) -> bytes | None:
    """A whole file one side of the socket left for the other (a run's held stream or capture in
    a memfd, its file in the service's scratch directory or where the call named it, a large
    capture the service handed its caller), in one ``pread`` of its size where it holds still:
    one copy in memory. None when it cannot be read or is no regular file (a FIFO's lines belong
    to its reader, and opening it must not wait). ``follow``: a link at the path is followed (a
    path the caller named may be one; the caller reading what its service left never does).
    ``most``: the first that many bytes at most (a capture the caller capped: the child may put
    a file of any size at its path, a sparse one in no time). ``failed`` gets a failed read's error."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = source if isinstance(source, int) else os.open(source, flags)
    except OSError as exc:
        if failed is not None:
            failed.append(exc)
        return None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            return None
        chunks, offset = [], 0
        end = found.st_size if most is None else min(found.st_size, most)
        while most is None or offset < most:
            wanted = max(end - offset, 1 << 16) if most is None else min(max(end - offset, 1 << 16), most - offset)
            chunk = os.pread(fd, wanted, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)  # one chunk is itself, not a copy
    except OSError as exc:
        if failed is not None:
            failed.append(exc)
        return None
    finally:
        if not isinstance(source, int):
            os.close(fd)


def above_the_standard_numbers(end: socket.socket) -> socket.socket:
    """``end`` moved to a descriptor above 2 where it took one of a closed standard stream's
    numbers (a caller started with ``<&-``): else the caller's later "standard streams", handed
    to a child, would be its connection, and the service's own end would be overwritten by the
    service's ``/dev/null`` stdin."""
    if end.fileno() > 2:
        return end
    try:
        return socket.socket(fileno=fcntl.fcntl(end.fileno(), fcntl.F_DUPFD_CLOEXEC, 3))
    finally:
        end.close()


def not_the_connection(sock: socket.socket, fds) -> None:
    """Raise ValueError when a descriptor a request would hand to a child is ``sock``, the
    caller's end of its service connection (a number or a dup of it): the child's writes would
    reach the service as frames of the caller's, and a malformed one ended the service with every
    run it carried. One not open is left to the send's own EBADF."""
    if not fds or sock.fileno() < 0:  # closed by another thread: the send says ServiceGone
        return
    own = os.fstat(sock.fileno())
    for fd in fds:
        try:
            found = os.fstat(fd)
        except OSError:
            continue
        if (found.st_dev, found.st_ino) == (own.st_dev, own.st_ino):
            raise ValueError(
                f"descriptor {fd} is this process's connection to its runner service, never a child's stream"
            )


def identity(fd: int) -> tuple[int, int] | None:
    """What descriptor ``fd`` is now (device, inode), None when it is not open."""
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def still_ours(sock: socket.socket, ident: tuple[int, int] | None) -> bool:
    """Whether ``sock``'s descriptor is still the one ``identity`` found: a caller that closed it
    (``os.closerange``) may have had its number reused since, and that number is let go (detached),
    never written to or closed by the socket object."""
    if identity(sock.fileno()) == ident:
        return True
    sock.detach()
    return False


def let_go(sock: socket.socket, ident: tuple[int, int] | None) -> None:
    """``sock`` closed, unless its number was closed by the caller and reused (then only detached)."""
    if still_ours(sock, ident):
        sock.close()


def all_open(fds) -> None:
    """Raise the OSError (EBADF) of a descriptor given that is not open, asked once a send failed: the
    kernel refused the frame, and the live service, with other threads' runs in flight, is not gone."""
    for fd in fds:
        os.fstat(fd)


def spec_or_changes(spec, described: tuple, last: tuple | None, extra: dict):
    """A run request's spec as it goes: whole the first time (``last`` None: none sent, or a service
    that reads only whole ones), then only the fields that differ from the last one sent (a dict),
    which the service applies to the last one it read (``service.inbound.Specs``): calls that differ
    in their run id alone send that, not the spec's 27 fields pickled again and read again.
    ``described`` and ``last``: (type, field values, request id). ``extra["base"]`` (the request's
    extra fields) names the request whose spec the changes are against (0: sent whole), so a frame
    the caller wrote itself between two of the library's is never taken as their base."""
    if last is None or last[0] is not described[0]:
        extra["base"] = 0
        return spec
    extra["base"] = last[2]
    return {
        name: value
        for name, value, before in zip(spec._fields, described[1], last[1])
        if value is not before and value != before
    }


def append(buffer: bytearray, message: tuple, mark: bytes = b"") -> None:
    """``message``'s frame added to ``buffer`` (the service's replies not yet sent): the pickle
    is copied once, into the buffer, never first into a frame of its own. ``mark``: the
    service's, after the header, then the request's id in clear (``Frames``)."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    start = len(buffer)
    try:
        head = mark + CALL_ID.pack(message[1]) if mark else b""
        buffer += HEADER.pack(len(head) + len(payload))  # struct.error past 4 GiB
        buffer += head
        buffer += payload
    except BaseException:
        del buffer[start:]  # never half a frame: the next would be read from its wrong byte
        raise


def send(sock: socket.socket, message: tuple, fds: list[int] | tuple[int, ...] = ()) -> None:
    """Send ``message``'s frame on a blocking socket (``send_framed``)."""
    send_framed(sock, framed(message), fds)


def framed(message: tuple, mark: bytes = b"") -> bytearray:
    """``message``'s whole frame, made before anything is written: an interruption while it is
    made (a pickle of a large request takes a while) leaves the socket as it was."""
    frame = bytearray()
    append(frame, message, mark)
    return frame


def send_framed(sock: socket.socket, frame: bytearray, fds: list[int] | tuple[int, ...] = ()) -> None:
    """Send one frame on a blocking socket, with ``fds`` beside its first byte. A signal
    handler's exception (Ctrl-C) raised out of it may have left part of the frame on the socket:
    the caller gives that connection up (``api.service.Connection.send``); the processes the
    service starts (``service.spawned``) end with theirs."""
    data = memoryview(frame)
    if fds:
        sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        data = data[sent:]
    if data:
        sock.sendall(data)


def sent_by(ancillary) -> tuple[int, int] | None:
    """The real user and group ids of the process that wrote a read's bytes, as the kernel says
    them (``SCM_CREDENTIALS``, on a socket with ``SO_PASSCRED``); None when it says none."""
    for level, kind, cmsg in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(cmsg) >= CREDENTIALS.size:
            _, uid, gid = CREDENTIALS.unpack_from(cmsg)
            return uid, gid
    return None


ANCILLARY = socket.CMSG_SPACE(MAX_FDS * 4)
CREDENTIALS = struct.Struct("iII")  # struct ucred: pid, uid, gid
WITH_SENDER = ANCILLARY + socket.CMSG_SPACE(CREDENTIALS.size)  # room for the descriptors and the sender
READ_MOST = 1 << 24  # the most one read asks for: more than a socket's buffer holds, unless its sender raised it
READ_LEAST = 1 << 12  # the read asked for when a usual one finds no room (an address space limit set on the service)


def receive(
    sock: socket.socket,
    frames: Frames,
    size: int = 1 << 16,
    space: int = ANCILLARY,
    kept: bool = True,
    sender: tuple[int, int] | None = None,
) -> list[tuple] | None:
    """What one ``recvmsg`` completes; None at the end of the stream. A large frame's rest is
    asked for whole (a 1 MiB capture in one call where the socket holds it, not sixteen), up to
    ``READ_MOST``: ``recvmsg`` allocates what it is asked for, and a frame whose length says 4 GiB
    (one the caller wrote itself) made the service ask for that, a ``MemoryError`` under an address
    space limit that ended it with every run it carried.
    ``space``: room for descriptors (0: any sent are closed by the kernel, never received).
    Those received are close-on-exec (``MSG_CMSG_CLOEXEC``): a child started while they are
    held (a batch's process, a caller's own ``Popen``) never keeps one; where one is handed on,
    it is made inheritable there (``spawned.start``) or put on 0-2 (the engine's spawns).
    Python runs a signal handler as soon as the call returns, and its exception (Ctrl-C's
    KeyboardInterrupt) dropped the bytes the call took: ``frames`` is then marked ``broken``.
    An OSError of the socket's own (it has an errno) took nothing. ``kept=False``: the frames
    handed back are not kept yet (the caller files them, then clears ``broken`` itself).
    ``sender``: the (uid, gid) every byte must come from (``sent_by``; ``space`` has room for it,
    ``WITH_SENDER``): a read from anyone else is never parsed (a pickle runs code as it is read),
    its descriptors are closed, and it is taken as the end of the stream."""
    if frames.broken:  # what comes is dropped, up to the end of the stream
        return [] if sock.recv(size) else None
    want = max(size, min(frames.missing(), READ_MOST))
    frames.broken = True  # until what the call takes is in the buffer: whatever is raised before, a second
    try:  # interruption included, leaves the stream given up, never read on from the wrong byte
        data, ancillary, _, _ = sock.recvmsg(want, space, socket.MSG_CMSG_CLOEXEC)
    except OSError as exc:
        frames.broken = exc.errno is None  # one of the socket's own took nothing
        raise
    except MemoryError:  # no room for the read asked: it took nothing
        if want <= size:  # none begun to let go: a smaller read, the least raised (the service's loop ends)
            if size <= READ_LEAST:
                raise
            frames.broken = False
            return receive(sock, frames, READ_LEAST, space, kept, sender)
        dropped = frames.give_up()  # the frame begun let go, its rest passed over as it comes
        frames.broken = not kept
        return dropped
    if sender is not None and data and sent_by(ancillary) != sender:
        close_all(rights(ancillary))
        return None  # ``broken`` stays set: nothing after it is read either
    messages = frames.feed(data, ancillary) if data else None
    frames.broken = not kept
    return messages


class EndedUnanswered(RuntimeError):
    """The process a call's request started ended without its frame (or none was started).
    ``code``: 104 (internal, ``errors.Kind``): what that process did is unknown, as a gone
    service's (``sending.ServiceGone``)."""

    def __init__(self, message: str) -> None:
        from ..errors import Kind

        super().__init__(message)
        self.code = Kind.INTERNAL.code


def one_reply(sock: socket.socket, what: str) -> tuple:
    """The one frame a process the service started for a call (a batch's, a benchmark's) writes
    back on its own connection. An interruption while it is awaited (Ctrl-C: KeyboardInterrupt)
    stops that process, as a stop signal would, by the source's name written to the connection,
    and its frame is still awaited (or, where the interruption dropped bytes of it, the end of
    the connection: that process has ended), so everything it ran has ended through its release
    before the interruption propagates. ``what`` names the process in the error of one that ended
    without a frame."""
    frames = Frames(lenient=False)
    interrupted: BaseException | None = None
    while True:
        try:
            messages = receive(sock, frames, space=0)  # it sends no descriptor
        except BaseException as exc:  # noqa: BLE001 - re-raised once that process has stopped
            if interrupted is None:
                interrupted = exc
                try:
                    sock.send(b"ctrl_c" if isinstance(exc, KeyboardInterrupt) else b"sigterm")
                except OSError:
                    pass
            continue
        if messages is None:
            if interrupted is not None:  # its reply went with bytes the interruption dropped
                raise interrupted
            raise EndedUnanswered(f"{what} process ended without a reply")
        if messages:
            if interrupted is not None:
                raise interrupted
            return messages[0][0]
