"""The sleepers of a connection shared by threads (``api.service.Connection``): each thread waiting
for a reply that another thread reads sleeps on a held lock of its own, its bell, released only when
a reply to its request is filed, so an answer wakes its own caller, never every waiting thread (with
eight threads waiting, a notify-all woke seven for nothing on each reply). Used under the
connection's mailbox lock."""

from __future__ import annotations

import threading


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
