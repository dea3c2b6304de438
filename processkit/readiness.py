"""The loop's readiness wait: ``selectors.EpollSelector``'s behaviour on ``select.epoll`` itself.

``selectors`` costs a plain ``run`` about a tenth of its start-up: importing it imports
``collections`` (with ``operator``, ``keyword``, ``reprlib``), ``collections.abc``, ``math`` and
builds its ABC-based classes, 8.5 M instructions against the whole run's ~86 M (bench/README.md,
"Start-up: the launcher's finder"), for the one selector the loop uses. The runner is Linux-only,
so that selector is always epoll: this is the part of it the loop calls, with the same results
(the interest masks, the mapping of epoll's flags, a timeout rounded up to the next
millisecond, an fd closed before it was unregistered, an interrupted wait), and ``key.fd`` on
what ``select`` returns, as a ``SelectorKey`` has.
"""

from __future__ import annotations

import select

EVENT_READ = 1
EVENT_WRITE = 2
_EPOLLIN = select.EPOLLIN
_EPOLLOUT = select.EPOLLOUT


class Key:
    """What ``select`` reports an fd by: its number and the interest it is registered with."""

    __slots__ = ("fd", "events")

    def __init__(self, fd: int, events: int):
        self.fd = fd
        self.events = events


class Selector:
    """One epoll instance; ``register``, ``modify``, ``unregister``, ``select``, ``close``."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._keys: dict[int, Key] = {}

    @staticmethod
    def _flags(events: int) -> int:
        return (_EPOLLIN if events & EVENT_READ else 0) | (_EPOLLOUT if events & EVENT_WRITE else 0)

    def fileno(self) -> int:
        """The epoll set's own fd (a native pump's stay waits on it: csrc/stay.c)."""
        return self._epoll.fileno()

    def register(self, fd: int, events: int) -> Key:
        if fd in self._keys:
            raise KeyError(f"{fd} is already registered")
        self._epoll.register(fd, self._flags(events))
        key = self._keys[fd] = Key(fd, events)
        return key

    def modify(self, fd: int, events: int) -> Key:
        key = self._keys[fd]
        if events != key.events:
            self._epoll.modify(fd, self._flags(events))
            key.events = events
        return key

    def unregister(self, fd: int) -> Key:
        key = self._keys.pop(fd)
        try:
            self._epoll.unregister(fd)
        except OSError:  # closed already: the kernel dropped it from the set with its last reference
            pass
        return key

    def select(self, timeout: float | None = None) -> list[tuple[Key, int]]:
        # ``poll`` rounds a timeout up to the next millisecond itself (a 0.1 ms wait is not a busy
        # poll), which selectors also does by hand.
        wait = -1.0 if timeout is None else max(timeout, 0.0)
        try:
            ready = self._epoll.poll(wait, max(len(self._keys), 1))
        except InterruptedError:
            return []
        found = []
        keys = self._keys
        for fd, flags in ready:
            key = keys.get(fd)
            if key is not None:
                # An error or hang-up wakes a reader and a writer alike.
                events = (EVENT_WRITE if flags & ~_EPOLLIN else 0) | (EVENT_READ if flags & ~_EPOLLOUT else 0)
                found.append((key, events & key.events))
        return found

    def close(self) -> None:
        self._epoll.close()
        self._keys.clear()
