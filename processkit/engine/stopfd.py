"""A host stopped from outside its process by a descriptor: the name of a stop's source
written to it, or its end of file (its writer gone: an API caller that ended). What a batch's
or a benchmark's process started for an API caller watches on its caller's connection, and a
Dask worker's chunk, which owns no signal, on a pipe another thread writes.

At end of file the descriptor leaves the loop: still registered, it would stay readable and
every turn would call it again with no wait (a busy spin through a long grace period).
"""

from __future__ import annotations

import os

from .signals import CALLER_GONE_SOURCE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .host import Host


def watch(host: Host, stop_fd: int) -> list[bool]:
    """Stop ``host`` once ``stop_fd`` says so; returns a flag set once its end of file was seen
    before any other stop (the caller gone, not a stop it asked for)."""
    gone = [False]

    def readable() -> None:
        try:
            word = os.read(stop_fd, 64)
        except BlockingIOError:
            return
        except OSError:
            word = b""
        if not word:
            host.loop.remove_reader(stop_fd)
            gone[0] = host.stop_source is None  # not after a stop the caller asked for
            host.stop(CALLER_GONE_SOURCE)  # what the events schema allows
            return
        host.stop(word.decode("ascii", "replace"))

    host.loop.add_reader(stop_fd, readable)
    return gone
