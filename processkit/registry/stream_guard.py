"""One stream, one run where the stream's own lock is kept from it (docs/run.md, "one stream, one
run"). A run holds its ``--jsonl`` by a write lock of its open file description
(``native.lock_stream``); a read lock in its way, which anyone who may read the file can take
(another user, on a stream the umask left readable), leaves the file unlocked, and then nothing on
the file itself can guard it: every lock there can be kept out by such a reader. So such a run holds
a key of the file's own in this user's registry instead, which no other user can open: a
``flock`` on ``.stream-<dev>-<ino>`` (hex), taken without waiting and held until its stream is
closed. A run that took the stream's lock looks at the key too (one ``open`` that finds nothing, as
a rule): a run writing the file unlocked holds it, and the later run is kept out as under the
stream's lock, never emptying that run's stream once the read lock is gone. A capture file is held
so too (one capture, one run), its key let go with its run's stream's. The key is made only
where a read lock was in the way and never removed (a removal would race a run opening it): one
empty file a stream so locked, which no scan of the registry reads (neither ``.json`` nor
``.lock``). A run that cannot open the registry (it warns and runs unregistered) has no key."""

from __future__ import annotations

import errno
import os

from ..native import Held, lock_exclusive, lock_stream
from .location import RegistryError, open_for_writing


def _opened(name: str, flags: int) -> int:
    """The key ``name`` opened, 0600 whatever the umask (an API caller's: engine/callers_umask):
    one made 0400 under umask 0277, or 0000 under 0777, could not be opened again for its lock
    (without file-permission override), and every later run of that file went unguarded. One an
    older run made so is made 0600 again: a name in this user's private registry, no one else's."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        key = os.open(name, flags, 0o600)
    except PermissionError:
        os.chmod(name, 0o600)
        key = os.open(name, flags, 0o600)
    try:
        if os.fstat(key).st_mode & 0o7777 != 0o600:
            os.fchmod(key, 0o600)
    except OSError:
        os.close(key)
        raise
    return key


class StreamKey:
    """The keys a run's files (its stream, its capture files) hold, if any, until ``close``."""

    def __init__(self) -> None:
        self.fds: list[int] = []

    def take(self, fd: int, found: os.stat_result, held: str, locked: bool) -> None:
        """``fd``: the file, ``found`` its ``fstat``; ``locked``: whether the file's own lock is
        held (or cannot be taken at all). Raises OSError EBUSY (``held`` its words) where another
        run of this user's writes the file unlocked (``Held``)."""
        try:  # checked once a process: this user's, on a path no one else can change
            directory = open_for_writing()
        except RegistryError:
            return  # no registry: the run is unregistered and unguarded, as before
        name = os.path.join(directory, f".stream-{found.st_dev:x}-{found.st_ino:x}")
        # Read-write even to look (never made then): on NFS and CIFS ``flock`` is a byte-range
        # lock, and an exclusive one needs the file open for writing (flock(2), NOTES).
        flags = os.O_RDWR if locked else os.O_RDWR | os.O_CREAT
        try:
            key = _opened(name, flags)
        except OSError:
            return  # none there (the rule), or one this user's registry cannot hold
        try:
            lock_exclusive(key)
            # Unlocked, the stream's lock is asked for again under the key: a run that took it
            # meanwhile (the read lock gone) refuses this one, and one free now is taken.
            if locked or lock_stream(fd):
                os.close(key)
                return
        except BlockingIOError:
            os.close(key)
            raise Held(errno.EBUSY, held) from None
        except OSError:
            os.close(key)
            return  # a key that takes no lock: unguarded, as the stream itself would be
        self.fds.append(key)

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)
