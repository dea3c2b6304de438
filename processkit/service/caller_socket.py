"""The runner service's end of its caller's socket: the replies written as the caller takes
them (the rest kept, the loop watching for room), the frames read with their writer checked,
and the end let go once the caller is gone. Apart from ``serve`` because it is the connection's
own state (what is not written yet, whether the loop watches for room); ``serve`` decides what
each frame means and what each reply says."""

from __future__ import annotations

import os

from ..api import wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Callable

    from ..loop import Loop


class CallerSocket:
    """``sock``, the service's end, watched on ``loop``; ``gone`` is called when a write finds
    the caller's end closed."""

    def __init__(self, sock: socket.socket, loop: Loop, gone: Callable[[], None]) -> None:
        self.sock = sock
        self.loop = loop
        self.gone = gone
        self.frames = wire.Frames(mark=os.urandom(8))  # each of the library's frames carries it (its hello says it)
        # Who its caller was when it started it, as the kernel names each read's writer (``SO_PASSCRED``, set by
        # ``main``): a caller that since became another user (a root daemon's, dropped) is never read again.
        self.sender = (os.getuid(), os.getgid())
        self.pending = bytearray()  # replies not yet taken by the socket
        self.writing = False  # the loop watches the socket for room to write the rest

    def send(self, message: tuple) -> None:
        wire.append(self.pending, message)
        self._flush()

    def _flush(self) -> None:
        try:
            while self.pending:
                sent = self.sock.send(self.pending)
                del self.pending[:sent]
        except BlockingIOError:  # the caller reads slower than replies come: the rest when it can
            if not self.writing:
                self.writing = True
                self.loop.add_writer(self.sock.fileno(), self._flush)
            return
        except OSError:
            self.pending.clear()
            self.gone()
            return
        if self.writing:
            self.writing = False
            self.loop.remove_writer(self.sock.fileno())

    def receive(self) -> list[tuple] | None:
        """The frames the caller wrote that are whole now (none: nothing to read yet), with the
        descriptors each brought; None once the caller's end is closed."""
        try:
            return wire.receive(self.sock, self.frames, space=wire.WITH_SENDER, sender=self.sender)
        except BlockingIOError:
            return []
        except OSError:
            return None

    def close(self) -> None:
        """The caller is gone: a frame cut short by the end gives back its descriptors, and the
        loop no longer watches the socket."""
        self.frames.close()
        self.loop.remove_reader(self.sock.fileno())
        if self.writing:
            self.writing = False
            self.loop.remove_writer(self.sock.fileno())
