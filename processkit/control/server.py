"""The control socket, served on the runner's own loop (docs/control-plane.md §1.1, §1.2).

No thread and no blocking call: every socket is non-blocking, every connection has its own
deadline timer, and the number of open connections is capped. A client that is slow, silent,
hostile or gone therefore costs at most a few bounded callbacks; it can never hold up the
output pump, the run's deadlines or its exit.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Callable

from . import protocol

CONNECTION_SECONDS = 5.0
ACCEPT_RETRY_SECONDS = 0.05
MAX_CONNECTIONS = 16
BACKLOG = 16

# verb, peer pid -> (reply, action to take once the reply is fully written)
Responder = Callable[[str, "int | None"], "tuple[dict, Callable[[], None] | None]"]


def peer_pid(sock: socket.socket) -> int | None:
    """The connecting process's pid, from the kernel (SO_PEERCRED), or None when unknown."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    pid = struct.unpack("3i", raw)[0]
    return pid if pid > 0 else None


class ControlServer:
    def __init__(self, loop, respond: Responder, path: str):
        """Bind a 0600 socket at ``path``, inside the run's fresh 0700 directory; raises OSError."""
        self.loop = loop
        self._respond = respond
        self._connections: set[Connection] = set()
        self._listening = False
        self._retry = None
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(self.path)
            try:
                os.chmod(self.path, 0o600)
            except OSError:
                pass  # best effort: the 0700 directory is the real gate
            self._sock.listen(BACKLOG)
            self._sock.setblocking(False)
        except OSError:
            self._sock.close()
            self._remove_socket()
            raise
        self._listen()

    def _listen(self) -> None:
        if not self._listening and self._retry is None and self._sock is not None:
            self._listening = True
            self.loop.add_reader(self._sock.fileno(), self._accept)

    def _pause(self) -> None:
        if self._listening:
            self._listening = False
            self.loop.remove_reader(self._sock.fileno())

    def _resume_after_error(self) -> None:
        self._retry = None
        self._listen()

    def _accept(self) -> None:
        while len(self._connections) < MAX_CONNECTIONS:
            try:
                sock, _ = self._sock.accept()
            except BlockingIOError:
                return
            except OSError:  # e.g. out of descriptors: back off instead of spinning
                self._pause()
                self._retry = self.loop.call_later(ACCEPT_RETRY_SECONDS, self._resume_after_error)
                return
            self._connections.add(Connection(self, sock))
        self._pause()  # resumed when a connection ends

    def respond(self, verb: str, pid: int | None):
        return self._respond(verb, pid)

    def forget(self, connection: Connection) -> None:
        self._connections.discard(connection)
        self._listen()

    def close(self) -> None:
        """Drop every connection, stop listening, remove the socket (the run removes its
        directory)."""
        if self._sock is None:
            return
        self._pause()
        if self._retry is not None:
            self._retry.cancel()
        sock, self._sock = self._sock, None  # type: ignore[assignment]  # closed: callers check for None
        for connection in list(self._connections):
            connection.close()
        sock.close()
        self._remove_socket()

    def _remove_socket(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


class Connection:
    """One client: read a line, write one reply, close; all within CONNECTION_SECONDS."""

    def __init__(self, server: ControlServer, sock: socket.socket):
        self._server = server
        self._loop = server.loop
        self._sock = sock
        self._fd = sock.fileno()
        sock.setblocking(False)
        self.peer_pid = peer_pid(sock)  # taken on accept, before anything is read
        self._buffer = protocol.RequestBuffer()
        self._out = memoryview(b"")
        self._after = None
        self._timer = self._loop.call_later(CONNECTION_SECONDS, self.close)
        self._loop.add_reader(self._fd, self._on_readable)

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
        reply, after = self._server.respond(verb, self.peer_pid)
        self._reply(reply, after)

    def _reply(self, reply: dict, after) -> None:
        self._loop.remove_reader(self._fd)
        self._out = memoryview(protocol.encode(reply))
        self._after = after
        self._on_writable()

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
            self._loop.add_writer(self._fd, self._on_writable)
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
