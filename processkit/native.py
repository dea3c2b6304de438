"""The optional C module ``processkit._native`` (csrc/): pump, SHA-256, spawn, ``prctl``, and
libc's ``wait4`` and ``getrusage``, ``flock`` (a shared one: ``fcntl``'s alone), and ``fcntl``'s
pipe size and open file description locks.

A C compiler is optional at install time, so every user of the module has a pure-Python
fallback. It is imported once, on first use; a failed import is remembered too.
"""

from __future__ import annotations

import errno
import os
import sys

from .errors import Failure, Kind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class StreamKey(Protocol):  # ``registry.stream_guard``'s, a layer above this one
        def take(self, fd: int, found: os.stat_result, held: str, locked: bool) -> None: ...
        def close(self) -> None: ...


_UNKNOWN = object()
_module = _UNKNOWN


def module():
    """The built module, or None where the installation has no native code."""
    global _module
    if _module is _UNKNOWN:
        try:
            from . import _native as found
        except ImportError:
            found = None
        _module = found
    return _module


def select_backend(variable: str, component: str) -> str:
    """``native`` or ``python`` for ``component`` as ``$variable`` asks: ``python`` forces the
    fallback, ``native`` demands the C path (a setup Failure when it was not built), anything
    else prefers native when it was built."""
    choice = os.environ.get(variable, "")
    if choice == "python":
        return "python"
    if module() is not None:
        return "native"
    if choice == "native":
        raise Failure(
            Kind.SETUP,
            f"{variable}=native but the native {component} (processkit._native) was not built; "
            f"reinstall with a C compiler available, or set {variable}=python",
        )
    return "python"


def sha256_hex(data: bytes) -> str:
    """One-shot SHA-256 hex digest; in C where built, which spares the run path importing hashlib."""
    native = module()
    if native is None:
        import hashlib

        return hashlib.sha256(data).hexdigest()
    ffi, lib = native.ffi, native.lib
    context = ffi.new("pk_sha256 *")
    digest = ffi.new("unsigned char[32]")
    lib.pk_sha256_init(context)
    lib.pk_sha256_update(context, data, len(data))
    lib.pk_sha256_final(context, digest)
    return ffi.buffer(digest)[:].hex()


def _loaded():
    """The C module where this process has loaded it already (a run: its launcher, to map the
    byte-code bundle, or its spawn), else None: a process that only reads the registry would load
    it for a lock, a dearer import than ``fcntl``'s."""
    return sys.modules.get("processkit._native")


def lock_exclusive(fd: int) -> None:
    """``fcntl.flock(fd, LOCK_EX | LOCK_NB)``, raising as it does (``BlockingIOError`` while
    another holds the lock); through libc's ``flock`` in the C module where it is loaded, which
    spares a run the ``fcntl`` extension module's load (~0.4 M instructions and its pages)."""
    native = _loaded()
    if native is None:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    lib = native.lib
    while lib.flock(fd, lib.LOCK_EX | lib.LOCK_NB) != 0:
        code = native.ffi.errno
        if code != errno.EINTR:
            raise OSError(code, os.strerror(code))  # the errno's own subclass, as fcntl's


def lock_shared(fd: int) -> None:
    """``fcntl.flock(fd, LOCK_SH | LOCK_NB)``, raising as it does; through the ``fcntl`` module
    alone: its one taker, the runner service's scratch mark (``service/scratch.py``), runs where
    ``api/wire.py`` has loaded it already, and the C module declares no ``LOCK_SH``."""
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)


def lock_stream(fd: int) -> bool:
    """An exclusive lock on the whole file owned by ``fd``'s open file description
    (``fcntl(F_OFD_SETLK)``), taken without waiting: ``BlockingIOError`` while another
    description holds a write lock there (a runner's: a process that may write the file). A read
    lock in its way is no run writing it, and anyone who may read the file can take one (another
    user, on a stream the umask left readable): the file then goes unlocked, never refused. A
    lock let go between the refusal and the question which it was is asked for again (up to
    ``_LOCK_TRIES`` times), so a file that came free is locked, not left unlocked for the next
    run to take. Apart from ``flock``'s (``flock FILE cmd`` never clashes with it); the kernel
    lets it go with the description's last descriptor. Through the C module where it is loaded
    (``lock_exclusive``). True when locked, False when the file goes unlocked."""
    for _ in range(_LOCK_TRIES):
        try:
            _lock_description(fd, True)
            return True
        except BlockingIOError:
            in_the_way = _lock_in_the_way(fd)
            if in_the_way == "write":
                raise
            if in_the_way == "read":
                return False  # the file goes unlocked
    # locks taken and let go over and over between the tries: no runner's (a runner holds its own
    # for its life), so the file goes unlocked as under a read lock
    return False


class Held(OSError):
    """A run's file another runner holds (EBUSY, the words its caller gave): told from a file that
    cannot be opened, which a run that may go on without its stream does not (``engine.runner``)."""


def hold_stream(fd: int, found: os.stat_result, held: str, key: StreamKey | None) -> None:
    """``lock_stream`` for a run's own file (its ``--jsonl`` stream, a capture file; ``found``
    its ``fstat``): another runner's write lock there refuses it (``Held``, ``held`` its words);
    any other failure to lock (a file system that cannot lock, a descriptor that takes no lock)
    leaves the file written unlocked, as before the lock. Then ``key``, the run's (None: none),
    takes the file, told whether a lock in the way (a read lock) left it unlocked
    (``registry.stream_guard``)."""
    try:
        alone = lock_stream(fd)
    except BlockingIOError:
        raise Held(errno.EBUSY, held) from None
    except OSError:
        alone = True
    if key is not None:
        key.take(fd, found, held, alone)


_LOCK_TRIES = 8
_FLOCK_LAYOUT = "hhqqi4x"  # struct flock: type, whence, start, length (0: to the end), pid


def _lock_in_the_way(fd: int) -> str | None:
    """The kind of lock that refused ``lock_stream`` (``F_OFD_GETLK``; asked only then, so
    through ``fcntl``): "write", "read", or None for one let go since."""
    import fcntl
    import struct

    asked = struct.pack(_FLOCK_LAYOUT, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    found = struct.unpack(_FLOCK_LAYOUT, fcntl.fcntl(fd, fcntl.F_OFD_GETLK, asked))[0]
    return {fcntl.F_WRLCK: "write", fcntl.F_RDLCK: "read"}.get(found)


def let_stream_go(fd: int) -> None:
    """Let ``lock_stream``'s lock go now, not with the last copy of the description: a carrier
    reading a run's stream back through one (``Emitter.reader``: the API's service, until it has
    replied) holds no lock of a run that ended; ``run --detach``'s launcher leaves it for its
    copy to take. Nothing to let go (a file system that cannot lock, a pipe) is no error."""
    try:
        _lock_description(fd, False)
    except OSError:
        pass


def _lock_description(fd: int, held: bool) -> None:
    native = _loaded()
    if native is None:
        import fcntl
        import struct

        kind = fcntl.F_WRLCK if held else fcntl.F_UNLCK
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK_LAYOUT, kind, os.SEEK_SET, 0, 0, 0))
        return
    lib = native.lib
    lock = native.ffi.new("struct flock *")  # zeroed: from the start, to the end of the file
    lock.l_type, lock.l_whence = (lib.F_WRLCK if held else lib.F_UNLCK), lib.SEEK_SET
    while lib.fcntl(fd, lib.F_OFD_SETLK, lock) != 0:
        code = native.ffi.errno
        if code != errno.EINTR:
            raise OSError(code, os.strerror(code))


def set_pipe_size(fd: int, size: int) -> int:
    """``fcntl.fcntl(fd, F_SETPIPE_SZ, size)``: the pipe's size now, raising OSError as it does;
    through the C module where it is loaded (``lock_exclusive``)."""
    native = _loaded()
    if native is None:
        import fcntl

        return fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
    lib = native.lib
    while (result := lib.fcntl(fd, lib.F_SETPIPE_SZ, native.ffi.cast("int", size))) < 0:
        code = native.ffi.errno
        if code != errno.EINTR:
            raise OSError(code, os.strerror(code))
    return result
