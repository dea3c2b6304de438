"""One control client on the runner's loop: read a line, write one reply, close, all within
CONNECTION_SECONDS (docs/control-plane.md §1.2). Imported when a client first connects."""

from __future__ import annotations

import socket
import struct

from .. import fdlimit
from . import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotation: the server imports this module, not the other way round
    from typing import Callable, Protocol

    from ..loop import Loop

    class Server(Protocol):
        """What a connection needs of the server that accepted it."""

        loop: Loop

        def respond(self, verb: str, pid: int | None) -> tuple[dict, Callable[[], None] | None]: ...

        def forget(self, ended: Connection) -> None: ...


CONNECTION_SECONDS = 5.0


def listener(fd: int) -> socket.socket:
    """The server's listening ``fd`` as a non-blocking ``socket.socket``, which owns it from here."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=fd)
    sock.setblocking(False)
    return sock


def peer_pid(sock: socket.socket) -> int | None:
    """The connecting process's pid, from the kernel (SO_PEERCRED), or None when unknown."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    pid = struct.unpack("3i", raw)[0]
    return pid if pid > 0 else None


class Connection:
    """One client: read a line, write one reply, close; all within CONNECTION_SECONDS."""

    def __init__(self, server: Server, sock: socket.socket):
        self._server = server
        self._loop = server.loop
        self._sock = sock
        self._fd = sock.fileno()
        sock.setblocking(False)
        self.peer_pid = peer_pid(sock)  # taken on accept, before anything is read
        # The peer is one of the run's own processes (the server's share); None: not asked yet
        self.member: bool | None = None
        self.idle = True  # no request has come whole yet
        self._buffer = protocol.RequestBuffer()
        self._out = memoryview(b"")
        self._after = None
        self._timer = self._loop.call_later(CONNECTION_SECONDS, self.close)
        self._loop.add_reader(self._fd, self._guarded(self._on_readable))

    def _guarded(self, step: Callable[[], None]) -> Callable[[], None]:
        """``step`` (this client's read or write) with its fault this client's alone: the
        connection closed unanswered, the run going on, where a client could end it (104). A
        fault once it is closed is the acknowledged action's (``after``): the run's own."""

        def guarded() -> None:
            try:
                step()
            except Exception:  # noqa: BLE001 - see above
                if self._sock is None:
                    raise
                self.close()

        return guarded

    @property
    def closed(self) -> bool:
        return self._sock is None

    def read_waiting(self) -> None:
        """Read what already waits in the socket now, not at the loop's next turn: the server,
        past its members' share, serves a request that came whole before it closes anything."""
        self._guarded(self._on_readable)()

    def _on_readable(self) -> None:
        try:
            chunk = self._sock.recv(self._buffer.room())
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        try:
            line = self._buffer.feed(chunk) if chunk else self._buffer.finish()
        except protocol.ProtocolError as exc:
            self._reply(protocol.error(str(exc)), None)
            return
        if line is None:
            return
        try:
            verb = protocol.parse_request(line)
        except protocol.ProtocolError as exc:
            self._reply(protocol.error(str(exc)), None)
            return
        try:
            reply, after = self._server.respond(verb, self.peer_pid)
        except Exception as exc:  # noqa: BLE001 - this client's own fault: an error reply, and the run goes on
            reply, after = protocol.error(fdlimit.unexpected(exc, "to answer").message), None
        self._reply(reply, after)

    def _reply(self, reply: dict, after) -> None:
        self.idle = False
        self._loop.remove_reader(self._fd)
        self._out = memoryview(protocol.encode(reply))
        self._after = after
        self._on_writable()  # under the guard of the read that made it

    def _on_writable(self) -> None:
        try:
            sent = self._sock.send(self._out, socket.MSG_NOSIGNAL)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self.close()  # the reply did not go out: nothing happens to the run
            return
        self._out = self._out[sent:]
        if self._out:
            self._loop.add_writer(self._fd, self._guarded(self._on_writable))
            return
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        after, self._after = self._after, None
        self.close()
        if after is not None:
            after()  # the acknowledgement is written before anything is torn down

    def close(self) -> None:
        if self._sock is None:
            return
        self._timer.cancel()
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self._sock.close()
        self._sock = None  # type: ignore[assignment]  # closed: callers check for None
        self._after = None
        self._server.forget(self)
