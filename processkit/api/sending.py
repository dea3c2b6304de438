"""The caller's writes to its runner service (``api.service.Connection``'s): a request, a stop of
one, and a request's spec sent whole when the service asks for it.

Facts about them:
- Each is one whole frame written under the send lock; a frame cut short (a signal handler
  raised as it was written) leaves the stream unreadable, so the connection is given up: its
  socket closed, the service ends its runs through their release.
- A run request's spec goes as its changes from the one the library sent last (``wire.spec_or_changes``),
  against the base its frame names. A frame the caller's own code wrote on the socket can take or
  shadow that base (``service.inbound.Specs``): the service then holds the request and asks for its
  spec whole (``("whole", rid)``), which the reading thread sends (``answer_whole``) from the
  request's box, the library's chain begun again from it. Before, the library went on sending changes
  against a base the service no longer held: every later call of the same spec type was refused, or
  run as the other frame's command. A request the library no longer waits for (its box forgotten) has
  no spec here: it is stopped instead.
- A frame whose own bytes hold the service's mark (the caller's inline input, args or env: 2^-64 a
  position) is cut there by the service's reader and answered 104 unread (``frames.Dropped``). It
  goes without its descriptors: the false frame begun at the mark lies where they arrive, so the
  service could not tell them from a later frame's and held them until the connection's next frame
  (a reader of the run's pipe waited that long). Its environment and spec are not taken as sent.
- A run request the service refused as it read it (more than it could hold, 111; cut or malformed,
  104: ``service.request.failed``'s reply, no start) left its environment change and its spec
  unrecorded there, though written whole: the next run request sent once that reply is read carries
  both whole (``note_refused``); one another thread sent before it was read runs without the change.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading

from ..errors import INTERNAL, SETUP
from . import caller_env, relay, reentry, stopped, wire
from .frames import cut_within

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterator


class ServiceGone(RuntimeError):
    """The runner service ended while a request of this process was waiting on it, or (in a forked
    child) the request's service is the parent's. ``code``, through ``errors.Kind``: 104 (internal)
    for a service gone under a call, whose outcome is then unknown (the reference has no such case;
    104, "waiting on the child failed", is what the call saw); 100 (usage) for a forked child's wait
    on its parent's service, a misuse as a suspended reader's wait is; 111 (setup) for
    ``ServiceUnstartable``."""

    kind = "INTERNAL"  # a ``Kind``'s name: ``errors`` is imported only once one is raised

    def __init__(self, message: str, kind: str = "") -> None:
        from ..errors import Kind

        super().__init__(message)
        self.code = getattr(Kind, kind or self.kind).code

    @classmethod
    def of(cls, owner: int) -> ServiceGone:
        """What is true of a service a call found gone: this process's ended, or, in a forked
        child, it is the service of process ``owner`` (the one that started it), never this one's."""
        if owner == os.getpid():
            return cls("the runner service of this process has ended")
        return cls(
            f"the runner service of process {owner}, which this process was forked from, is not this "
            "process's: a run it carries cannot be waited for here (this process's own calls start its own service)",
            "USAGE",
        )


class ServiceUnstartable(ServiceGone):
    """The runner service could not start: it said why in its hello (no scratch directory anywhere,
    an open-file limit too low for it), or said none in time. Raised at once, never retried within
    the call (a second start fails too). ``code``: the set-up failure's (111, ``errors.Kind``)."""

    kind = "SETUP"


class Sender:
    """What writes to the service, of a connection (``api.service.Connection``)."""

    sock: socket.socket
    owner: int
    gone: bool
    sent_env: tuple
    sent_spec: tuple | None
    unrecorded: bool  # a run refused unread was heard of: what it carried goes whole with the next (``note_refused``)
    spec_changes: bool
    mark: bytes
    _ids: Iterator[int]
    _send_lock: threading.Lock
    _mail: threading.RLock
    _boxes: dict[int, list[tuple]]
    forget: Callable[[int], None]
    intact: Callable[..., bool]
    _ended: Callable[..., None]

    @reentry.counted
    def send(self, kind: str, *payload, fds: list[int] | tuple[int, ...] = (), env: bool = False) -> int:
        """Send a request; returns its id. ``env``: carry the caller's environment and its
        umask, each where it differs from what the last request sent (``caller_env.changed``).
        The service records them as it *reads* the request, in the order they were written
        (under the send lock), and every later request is run with them: a request cancelled
        before its first step, or one that never runs, still leaves its change for the next;
        none is lost, whichever thread sends."""
        wire.not_the_connection(self.sock, fds)
        rid = next(self._ids)
        box = relay.Box(payload[0] if kind == "run" else None)
        with self._mail:
            self._boxes[rid] = box
        with self._send_lock:
            if self.gone:
                raise ServiceGone.of(self.owner)
            if self.unrecorded and kind == "run":  # nothing of the last sent is taken as the service's
                self.unrecorded, self.sent_env, self.sent_spec = False, (None, None, None), None
            try:  # until its frame is made, nothing is written: an interruption keeps the connection
                message: tuple = (kind, rid, *payload)
                current = None
                if env:
                    message[3]["caller"], current = caller_env.changed(self.sent_env)
                spec = None
                if kind == "run":
                    spec = (type(payload[0]), payload[0]._values(), rid)
                    last = self.sent_spec if self.spec_changes else None  # a service that reads changes
                    message = (kind, rid, wire.spec_or_changes(payload[0], spec, last, payload[1]), *payload[1:])
                frame = wire.framed(message, self.mark)
            except BaseException:
                self.forget(rid)  # no reply will come: its box goes with the call
                raise
            unread = cut_within(frame, self.mark)  # answered 104 unread: sent without what it would hand on
            sent_fds = () if unread else fds
            whole: list[bool] = []  # the relayed frame written whole (True), or cut to wake its write (False)

            def write() -> None:  # the relay's: once it returns, the frame is whole
                wire.send_framed(self.sock, frame, sent_fds)
                whole.append(True)

            def cut() -> None:  # a second interruption: the relay's write woken (EPIPE), the connection given up
                whole.insert(0, False)
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RDWR)

            try:
                if kind == "run" and relay.wanted(self._boxes.values()):  # the main thread's, others' open
                    box.interrupted = relay.written(write, lambda: stopped.look(self), cut)
                else:
                    wire.send_framed(self.sock, frame, sent_fds)
            except OSError:  # nothing of this request reached the service
                try:
                    wire.all_open(fds)  # a closed one is the caller's error (EBADF), as subprocess's
                except OSError:
                    self.forget(rid)  # no reply will come: its box goes with the call
                    raise
                self.gone = True  # else the service is gone
                raise ServiceGone.of(self.owner) from None
            except BaseException as exc:
                if whole and whole[0]:  # a handler raised once the relayed frame was whole: its reply waits for it
                    box.interrupted = box.interrupted or exc
                else:
                    self.gone = True  # first, before any call (where a handler may raise again): nobody writes after
                    socket.SocketType.close(self.sock)  # in C, no frame of Python first: the service sees the end
                    self._ended(given_up=True)  # part of the frame may be on the socket: the service ends its runs
                    raise
            box.sent = True
            if unread:  # what it carried is still to send
                return rid
            if current is not None:  # written whole: the service has it (or is gone)
                self.sent_env = current
            if spec is not None:
                self.sent_spec = spec
        return rid

    def note_refused(self, replies: list[tuple]) -> None:
        """Replies read (the reading thread's, before their waiters wake): one refusing a run unread
        (see above) marks the next run request's environment and spec to go whole. The mark is taken
        up under the send lock, never reset here: a send under way as it is set records what it sent,
        and the one after it goes whole."""
        for reply in replies:
            report = reply[2] if reply[0] == "done" else None
            if type(report) is dict and "started_ns" not in report and report.get("code") in (INTERNAL, SETUP):
                self.unrecorded = True

    def interrupted(self, rid: int) -> None:
        """Raise the interruption ``send`` held back as ``rid``'s frame was written (``relay.written``), once."""
        box = self._boxes.get(rid)
        held = getattr(box, "interrupted", None)
        if held is not None:
            box.interrupted = None  # type: ignore[union-attr]
            raise held

    @reentry.counted
    def signal(self, rid: int, source: str) -> None:
        """End the run ``rid`` as a stop signal would (the caller was interrupted)."""
        self._write(("signal", rid, source))

    def answer_whole(self, asked: list[tuple]) -> None:
        """The service asked for these requests' specs whole (see above): each sent from its box,
        or the request stopped when nobody here waits for it, or its frame was not written (a frame
        the caller wrote took an id the library numbered but had not sent: never run as the library's
        spec under that frame's fields and descriptors); the next request's spec goes whole."""
        for message in asked:
            self._write(message, answer=True)

    def _write(self, message: tuple, answer: bool = False) -> None:
        """One frame of no reply of its own, unless the service is gone. ``answer``: ``message`` is
        the service's ask (``answer_whole``), answered as the send lock is held (a frame written whole
        is marked so before it is let go), and the next run request's spec goes whole (what the
        service holds of the last one sent is not known).
        Outside the main thread, the send lock is waited for looking at the service each
        ``WATCH_SECONDS`` (the reader's ``answer_whole``: its holder's write may wait on a service
        a signal stopped, and nobody else looks); in the main thread, where a handler raising as a
        timed wait returned would lose the lock taken, as ever."""
        if threading.get_ident() == threading.main_thread().ident:
            with self._send_lock:
                self._write_held(message, answer)
            return
        while not self._send_lock.acquire(timeout=stopped.WATCH_SECONDS):
            stopped.look(self)
        try:
            self._write_held(message, answer)
        finally:
            self._send_lock.release()

    def _write_held(self, message: tuple, answer: bool) -> None:
        if answer:
            self.sent_spec = None
            with self._mail:
                box = self._boxes.get(message[1])
            spec = box.spec if isinstance(box, relay.Box) and box.sent else None
            message = ("signal", message[1], "sigterm") if spec is None else ("spec", message[1], spec)
        if self.intact(looks=False):  # a reused number is never written to
            frame = wire.framed(message, self.mark)
            try:
                wire.send_framed(self.sock, frame)
            except OSError:
                return
            except BaseException:
                self.gone = True  # as in ``send``
                socket.SocketType.close(self.sock)
                self._ended(given_up=True)
                raise
