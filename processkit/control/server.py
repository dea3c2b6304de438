"""The control socket, served on the runner's own loop (docs/control-plane.md §1.1, §1.2).

No thread and no blocking call: every socket is non-blocking, every connection has its own
deadline timer (``connection``), and the number of open connections is capped. A client that
is slow, silent, hostile or gone therefore costs at most a few bounded callbacks; it can never
hold up the output pump, the run's deadlines or its exit.

The run's own processes (``member``: the kernel's peer pid, asked of the container only once more
than MEMBER_CONNECTIONS are open; a peer gone already counts as one) hold at most
MEMBER_CONNECTIONS of them: past that, their oldest connection still without a request is
closed for the newer one (one whose request already waits unread is served instead). So a child holding connections open (reopened as each closes) cannot
keep its owner's ``cancel`` queued past its deadline: the queue ahead of it drains at once.

Facts about start-up that shape this module: every run listens, but most never get a client,
and Python's socket modules cost a run's start-up more than the listen itself (``socket``
builds enums, which import ``enum``; even ``_socket`` builds hundreds of constants). So the
listening socket is made by the native module (``pk_listen_unix`` in csrc/listen.c), and
``socket`` is imported, with ``connection``, when a client first connects; where the native
module was not built, ``socket`` makes it.
"""

from __future__ import annotations

import os

from .. import native
from .address import reachable, release

ACCEPT_RETRY_SECONDS = 0.05
MAX_CONNECTIONS = 16
MEMBER_CONNECTIONS = 8  # of MAX_CONNECTIONS, the most the run's own processes hold at once
ACCEPTS_PER_TURN = 64  # then the loop's other work has its turn (a flood of connects keeps coming)
# Connections past MAX_CONNECTIONS wait in the kernel's listen queue (the server stops accepting,
# it never refuses): deep enough for a farm's burst of pollers, and a client that still finds it
# full retries within its connect deadline (transport.py). Capped by net.core.somaxconn.
BACKLOG = 1024

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Callable

    from . import connection

    # verb, peer pid -> (reply, action to take once the reply is fully written)
    Responder = Callable[[str, int | None], tuple[dict, Callable[[], None] | None]]


def listen_unix(path: str) -> int:
    """A non-blocking, close-on-exec socket listening at ``path`` (0600, best effort: the run's
    0700 directory is the real gate), through a short address where its path is too long for one
    (``address``): its fd; raises OSError, leaving a bound file to the caller."""
    address, handle = reachable(path)
    try:
        return _listen_at(address)
    finally:
        release(handle)


def _listen_at(address: str) -> int:
    built = native.module()
    if built is not None:
        fd = built.lib.pk_listen_unix(os.fsencode(address), BACKLOG)
        if fd < 0:
            raise OSError(-fd, os.strerror(-fd))
        return fd
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(address)
        try:
            os.chmod(address, 0o600)
        except OSError:
            pass
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock.detach()


class ControlServer:
    def __init__(self, loop, respond: Responder, path: str, member: Callable[[int | None], bool]):
        """Listen at ``path``, inside the run's fresh 0700 directory; raises OSError. ``member``:
        whether a peer pid is one of the run's own processes, asked only past MEMBER_CONNECTIONS
        open connections."""
        self.loop = loop
        self._respond = respond
        self._member = member
        self._connections: dict[connection.Connection, None] = {}  # in the order they came
        self._listening = False
        self._retry = None
        self.path = path
        try:
            self._fd = listen_unix(path)  # -1 once closed
        except OSError:
            self._remove_socket()
            raise
        self._sock: socket.socket | None = None  # the listening fd as a socket, from the first client on
        self._listen()

    def _listen(self) -> None:
        if not self._listening and self._retry is None and self._fd >= 0:
            self._listening = True
            self.loop.add_reader(self._fd, self._accept)

    def _pause(self) -> None:
        if self._listening:
            self._listening = False
            self.loop.remove_reader(self._fd)

    def _resume_after_error(self) -> None:
        self._retry = None
        self._listen()

    def _accept(self) -> None:
        from . import connection

        if self._sock is None:
            self._sock = connection.listener(self._fd)
        for _ in range(ACCEPTS_PER_TURN):
            if len(self._connections) >= MAX_CONNECTIONS:
                self._pause()  # resumed when a connection ends
                return
            try:
                sock, _ = self._sock.accept()
            except BlockingIOError:
                return
            except OSError:  # e.g. out of descriptors: back off instead of spinning
                self._pause()
                self._retry = self.loop.call_later(ACCEPT_RETRY_SECONDS, self._resume_after_error)
                return
            opened = connection.Connection(self, sock)
            self._connections[opened] = None
            if len(self._connections) > MEMBER_CONNECTIONS:
                self._members_within_share()

    def _members_within_share(self) -> None:
        """Past MEMBER_CONNECTIONS of the run's own, the oldest without a request is closed. A
        connection not read yet may hold its whole request already (a fast client's burst,
        accepted in one turn): each is read first, as if its turn had come, and served if so;
        the next one is then considered. Still past the share with none idle, the oldest open
        one is closed (a member that does not read its replies loses its own)."""
        for open_connection in self._connections:  # the oldest first; each peer asked once
            if open_connection.member is None:
                open_connection.member = self._member(open_connection.peer_pid)
        members = [open_connection for open_connection in self._connections if open_connection.member]
        excess = len(members) - MEMBER_CONNECTIONS
        for candidate in members:
            if excess <= 0:
                return
            if candidate.idle and not candidate.closed:
                candidate.read_waiting()
                if candidate.idle:
                    candidate.close()
            excess -= candidate.closed
        for candidate in members:
            if excess <= 0:
                return
            if not candidate.closed:
                candidate.close()
                excess -= 1

    def respond(self, verb: str, pid: int | None):
        return self._respond(verb, pid)

    def forget(self, ended: connection.Connection) -> None:
        self._connections.pop(ended, None)
        self._listen()

    def close(self) -> None:
        """Drop every connection, stop listening, remove the socket (the run removes its
        directory)."""
        if self._fd < 0:
            return
        self._pause()
        if self._retry is not None:
            self._retry.cancel()
        fd, self._fd = self._fd, -1
        for open_connection in list(self._connections):
            open_connection.close()
        if self._sock is not None:  # it owns the fd
            self._sock.close()
            self._sock = None
        else:
            os.close(fd)
        self._remove_socket()

    def _remove_socket(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass
