"""The sleepers of a connection shared by threads (``api.service.Connection``): each thread waiting
for a reply that another thread reads sleeps on a held lock of its own, its bell, released only when
a reply to its request is filed, so an answer wakes its own caller, never every waiting thread (with
eight threads waiting, a notify-all woke seven for nothing on each reply). Used under the
connection's mailbox lock, as the replies read are filed."""

from __future__ import annotations

import threading

from .streams import discard

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


class Bells(dict):
    """Request id -> the held locks its waiters sleep on."""

    def hang(self, rid: int) -> threading.Lock:
        """A held lock a waiter of ``rid`` sleeps on until it is rung."""
        bell = threading.Lock()
        bell.acquire()
        self.setdefault(rid, []).append(bell)
        return bell

    def unhang(self, rid: int, bell: threading.Lock) -> None:
        """A sleeper of ``rid`` that woke (rung, or its time up) leaves the sleepers."""
        bells = self.get(rid)
        if bells is not None and bell in bells:
            bells.remove(bell)
            if not bells:
                del self[rid]

    def ring(self, rid: int) -> None:
        """Wake every thread sleeping on ``rid``."""
        for bell in self.pop(rid, ()):
            bell.release()

    def ring_one(self) -> None:
        """Wake the sleepers of one request (the next reader among them), if any sleeps."""
        if self:
            self.ring(next(iter(self)))

    def ring_all(self) -> None:
        """Wake every sleeper (the service has ended)."""
        for rid in list(self):
            self.ring(rid)

    def file(
        self, messages: list[tuple], boxes: dict[int, list[tuple]], woken: dict[int, Callable[[], None]]
    ) -> list[Callable[[], None]]:
        """Each reply into its request's box (one no longer wanted dropped, its large captures'
        files removed), that request's sleepers rung; the callbacks to tell (``Connection.wake``),
        called once every reply is filed."""
        for message in messages:
            box = boxes.get(message[1])
            if box is not None:
                box.append(message)
                self.ring(message[1])
            elif len(message) > 2 and isinstance(message[2], dict):  # a call that gave up waiting (a second Ctrl-C)
                discard(message[2])
        return [woken[m[1]] for m in messages if m[1] in woken]
