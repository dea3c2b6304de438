"""The control socket, served on the runner's own loop (docs/control-plane.md §1.1, §1.2).

No thread and no blocking call: every socket is non-blocking, every connection has its own
deadline timer (``connection``), and the number of open connections is capped. A client that
is slow, silent, hostile or gone therefore costs at most a few bounded callbacks; it can never
hold up the output pump, the run's deadlines or its exit.

Facts about start-up that shape this module: most runs never get a client, and the ``socket``
module costs a run's start-up its import (its enums import ``enum``). Listening needs only the
C module ``_socket`` under it, whose socket type is the base of ``socket.socket`` with the same
``bind``, ``listen`` and ``_accept``; so the socket is made through ``_socket`` (``socket``
where an interpreter has no such module), and ``socket`` is imported with ``connection`` when
a client first connects.
"""

from __future__ import annotations

import os

try:
    import _socket as sockets
except ImportError:  # an interpreter without CPython's _socket
    import socket as sockets  # type: ignore[no-redef]

ACCEPT_RETRY_SECONDS = 0.05
MAX_CONNECTIONS = 16
BACKLOG = 16

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from . import connection

    # verb, peer pid -> (reply, action to take once the reply is fully written)
    Responder = Callable[[str, int | None], tuple[dict, Callable[[], None] | None]]


class ControlServer:
    def __init__(self, loop, respond: Responder, path: str):
        """Bind a 0600 socket at ``path``, inside the run's fresh 0700 directory; raises OSError."""
        self.loop = loop
        self._respond = respond
        self._connections: set[connection.Connection] = set()
        self._listening = False
        self._retry = None
        self.path = path
        self._sock = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
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
        from . import connection

        while len(self._connections) < MAX_CONNECTIONS:
            try:
                fd, _ = self._sock._accept()  # type: ignore[attr-defined]  # _socket's, under socket.accept
            except BlockingIOError:
                return
            except OSError:  # e.g. out of descriptors: back off instead of spinning
                self._pause()
                self._retry = self.loop.call_later(ACCEPT_RETRY_SECONDS, self._resume_after_error)
                return
            self._connections.add(connection.Connection(self, connection.wrap(fd)))
        self._pause()  # resumed when a connection ends

    def respond(self, verb: str, pid: int | None):
        return self._respond(verb, pid)

    def forget(self, ended: connection.Connection) -> None:
        self._connections.discard(ended)
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
        for open_connection in list(self._connections):
            open_connection.close()
        sock.close()
        self._remove_socket()

    def _remove_socket(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass
