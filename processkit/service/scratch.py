"""The runner service's scratch: its directory in the batch base (made fresh, the directories of
services that died without removing theirs swept first; in ``/tmp`` when the batch base cannot
hold it, marked there so that later services sweep there too), and the files of the runs it carried:
their sizes, and a large capture copied out (a file is read back whole by ``api.wire.read_back``,
the caller's idiom too)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
import time

from ..api import wire
from ..engine.waits import Wait
from ..errors import setup_failure
from ..native import lock_exclusive, lock_shared

SCRATCH_PREFIX = "processkit-api-"  # a service's scratch directory: processkit-api-<pid>-<random>
MAKING_PREFIX = ".processkit-api-"  # the same directory while it is made, before its lock is held
# A capture the full scratch cannot take comes back in the reply up to this size, above it not at
# all (said: ``unkept``): the reply's frame is pickled whole in the service's memory and read whole
# in the caller's (a 256 MiB capture took the service to 787 MiB), and its length field ends at 4 GiB.
INLINE_FALLBACK_MOST = 64 << 20
PIECE = 8 << 20  # the most ``copy_out`` copies between two turns of the service's loop (a few ms)
MAKING_LEFT = 60.0  # seconds after which a directory left being made (its service killed then) is swept
# Names tried for a directory made before one is free: each is fresh random bytes, so another
# user who took one (the base is world-listable, as /dev/shm) cannot take the next.
NAME_TRIES = 8
MARK_TRIES, MARK_PAUSE = 20, 0.01  # a mark a sweep holds: tried for ~0.2 s, then gone without
# What rename says when the name is taken: a directory (ours, not empty: ENOTEMPTY, EEXIST;
# another user's in a sticky base: EPERM), or something else (ENOTDIR).
_TAKEN = (errno.EEXIST, errno.ENOTEMPTY, errno.EPERM, errno.ENOTDIR)
# The service's own umask (``serve.main``): its scratch and files are its user's alone, made with
# their modes whatever umask its first caller started it under (a caller's is its runs' alone).
OWN_UMASK = 0o077


def make(base: str) -> tuple[str, int]:
    """A fresh 0700 scratch directory of this service's in ``base``, and the descriptor that holds
    its lock (``flock``) for as long as this service lives: the sweep of another service, in
    this pid namespace or another sharing ``base`` (a container sharing /dev/shm), removes a
    directory only once it can take that lock. The directory is made under a name the sweep
    does not take for a service's, locked, then renamed, so it is never seen unlocked. Its name
    as a service's is fresh random bytes, not the name it was made under (which anyone listing
    ``base`` sees), taken again when in use (``NAME_TRIES``): another user who made that name
    first would otherwise keep the service from starting."""
    _sweep(base)
    made = tempfile.mkdtemp(prefix=f"{MAKING_PREFIX}{os.getpid()}-", dir=base)
    fd = -1
    try:
        fd = os.open(made, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        lock_exclusive(fd)  # just made: no one else holds it
        path = _rename_fresh(made, base)
    except OSError:
        if fd >= 0:
            os.close(fd)
        shutil.rmtree(made, ignore_errors=True)
        raise
    return path, fd


def make_in(bases: list[str]) -> tuple[str, int]:
    """``make`` in the first of ``bases`` where it can be made: another user can fill a shared
    tmpfs (``/dev/shm``: its space or its inodes) and so keep the service from starting, and
    every call of its caller failing, where ``/tmp`` would still do. Raises OSError saying what
    each base said. A directory made in a later base is marked there (``_marked``), and a
    service made in the first sweeps a later base only while it holds that mark: a killed
    service's directory there is swept once the first base has room again, and a start that
    finds no mark pays one failed ``open``, not a listing of ``/tmp``."""
    said = []
    for index, base in enumerate(bases):
        try:
            if index:
                return _marked(base)
            made = make(base)
        except OSError as exc:
            said.append(f"in {base}: {exc.strerror or exc}")
            continue
        for later in bases[1:]:
            _sweep_marked(later)
        return made
    raise OSError(f"the runner service cannot make its scratch directory ({'; '.join(said)})")


def _mark_path(base: str) -> str:
    """The mark of this user's scratch directories in a later base (not a service's name: a
    sweep passes it by)."""
    return os.path.join(base, f"{MAKING_PREFIX}elsewhere-{os.geteuid()}")


def _marked(base: str) -> tuple[str, int]:
    """``make`` in ``base``, its mark held shared meanwhile (``flock``), so a sweep that finds
    none of this user's directories there and removes the mark (holding it exclusively) never
    does so while one is being made. A mark that cannot be made or held (``_held_shared``) is
    gone without: the directory is still made, and swept only by a service that makes its own
    there."""
    path = _mark_path(base)
    mark = _held_shared(path, 0)
    if mark >= 0 and not same_file(path, os.fstat(mark)):  # removed by a sweep meanwhile: again
        os.close(mark)
        mark = _held_shared(path, os.O_EXCL)
    try:
        return make(base)
    finally:
        if mark >= 0:
            os.close(mark)


def _held_shared(path: str, exclusive: int) -> int:
    """The mark at ``path`` opened (made if missing; only made, when ``exclusive`` is O_EXCL) and
    locked shared, or -1. Refused: what is not this user's regular file (another user took its
    name first in a shared ``/tmp``), and a file with another name (``st_nlink``): where
    ``fs.protected_hardlinks`` is off, another user can link there a file of this user's that
    some program holds locked, and a lock that waited for it would keep the service from
    starting, and every call of its caller waiting, for as long. Never waited for: tried
    ``MARK_TRIES`` times, ``MARK_PAUSE`` apart, as a sweep holds it exclusively only while it
    sweeps."""
    try:
        flags = os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        mark = os.open(path, flags | exclusive, 0o600)
    except OSError:
        return -1
    try:
        found = os.fstat(mark)
        if stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid() and found.st_nlink == 1:
            for _ in range(MARK_TRIES):
                try:
                    lock_shared(mark)
                    return mark
                except BlockingIOError:
                    time.sleep(MARK_PAUSE)
    except OSError:
        pass
    os.close(mark)
    return -1


def _sweep_marked(base: str) -> None:
    """``base`` swept when this user's mark is there (``_marked``), and the mark removed once
    none of this user's directories is left in it; nothing when a service is being made there."""
    path = _mark_path(base)
    try:
        mark = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return  # no mark: the common case, one failed open
    try:
        found = os.fstat(mark)
        if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
            return
        lock_exclusive(mark)
        if not _sweep(base) and same_file(path, os.fstat(mark)):
            os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(mark)


def _rename_fresh(made: str, base: str) -> str:
    """``made`` renamed to a service's name in ``base`` no one is using; raises OSError."""
    for _ in range(NAME_TRIES):
        path = os.path.join(base, f"{SCRATCH_PREFIX}{os.getpid()}-{os.urandom(8).hex()}")
        try:
            os.rename(made, path)
            return path
        except OSError as exc:
            if exc.errno not in _TAKEN:
                raise
    raise OSError(errno.EEXIST, f"each of {NAME_TRIES} fresh names for a scratch directory in {base} was taken")


def remove(path: str, lock: int) -> None:
    """This service's scratch directory removed, then its lock let go."""
    shutil.rmtree(path, ignore_errors=True)
    os.close(lock)


def _sweep(base: str) -> int:
    """Remove the scratch directories of this user's services that are gone: one killed itself
    (SIGKILL, the OOM killer) could not remove its own, and nothing else knows it. A directory
    whose service's pid is alive here, whose lock a live service holds (in any pid namespace:
    a pid alone names no process across them), or that is not this user's, is left alone.
    Returns how many of this user's it left (or 1 when ``base`` cannot be listed)."""
    try:
        names = [name for name in os.listdir(base) if name.startswith((SCRATCH_PREFIX, MAKING_PREFIX))]
    except OSError:
        return 1
    left = 0
    for name in names:
        making = name.startswith(MAKING_PREFIX)
        pid = name[len(MAKING_PREFIX if making else SCRATCH_PREFIX) :].split("-", 1)[0]
        path = os.path.join(base, name)
        try:
            found = os.lstat(path)
        except OSError:
            continue
        if not pid.isdigit() or not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
            continue
        left += 1
        if making and time.time() - found.st_mtime < MAKING_LEFT:
            continue  # being made now, its lock not yet held
        try:
            os.kill(int(pid), 0)
            continue  # alive (or another user's process with that pid): never swept
        except ProcessLookupError:
            pass
        except OSError:
            continue
        left -= _remove_unlocked(path)
    return left


def _remove_unlocked(path: str) -> bool:
    """``path`` removed when no live service holds its lock (held while it is removed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            return False
        lock_exclusive(fd)
    except OSError:  # held: its service lives (in another pid namespace, say)
        os.close(fd)
        return False
    try:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)
    return not os.path.lexists(path)


def same_file(path: str, own: os.stat_result) -> bool:
    """Whether ``path`` (never followed) is still the file ``own`` describes: a capture the
    caller may read by its name, as no other file was put there since."""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (own.st_dev, own.st_ino)


def run_directory(path: str) -> None:
    """A run's capture directory in the scratch, made 0700 before the run's steps (the service's
    own umask, ``OWN_UMASK``, leaves it so; the caller's is its child's and its named
    files', never the scratch's: ``engine.callers_umask``). Raises ``Failure`` (a set-up
    failure, as the engine's own making of a capture directory is: ``ENOSPC`` in a full base)."""
    try:
        os.mkdir(path, 0o700)
    except OSError as exc:
        raise setup_failure(f"could not set up output capture in `{path}`", exc) from None


def copy_out(source: int, path: str, size: int):
    """``size`` bytes of the memfd ``source`` into a new file ``path`` (never one that exists),
    copied by the kernel (``sendfile``): the bytes never pass through this process. Raises OSError.
    ``yield from`` this in a run: it copies ``PIECE`` bytes a step and yields a turn between them,
    so the service's other calls go on (400 MB in one go held every other thread's for half a second)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        offset = 0
        while offset < size:
            sent = os.sendfile(fd, source, offset, min(size - offset, PIECE))
            if not sent:
                break
            offset += sent
            if offset < size:
                yield Wait(_now)  # resumed on the loop's next turn, after what it brought
    finally:
        os.close(fd)


def _now() -> bool:
    return True


def not_copied(report: dict, name: str, fd: int, size: int, why: str) -> None:
    """A capture ``copy_out`` could not put in the scratch (``why``: a full tmpfs) into the reply:
    inline up to ``INLINE_FALLBACK_MOST``, else no bytes, and the reply says so (``unkept``), never a silent None."""
    if size <= INLINE_FALLBACK_MOST:
        report[name] = wire.read_back(fd, most=size)
    else:
        why = f"no room in the service's scratch ({why}) and over the {INLINE_FALLBACK_MOST >> 20} MiB a reply carries"
        report.setdefault("unkept", []).append((name, size, why))
