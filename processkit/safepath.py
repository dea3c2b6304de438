"""Paths another user may control: every file the runner creates goes through here.

The trust boundary is the OS user (docs/threat-model.md, "Other users' paths"). Three rules,
applied whatever the host's ``fs.protected_*`` sysctls say:

- A symbolic link in a world-writable sticky directory (``/tmp``) is followed only when its
  owner is this user or the directory's owner, as ``fs.protected_symlinks`` does; a link that
  is the file itself (``--jsonl LINK``, a capture file) only when it is this user's or root's,
  wherever it is; so is a link a later ``..`` climbs above (``LINK/..``; not ``LINK/x/../y``),
  but the sticky directory owner's there. Paths are walked one component at a time relative to
  directory handles, so what was checked is what is used. Links in ``/proc`` (``/dev/stderr``,
  ``/dev/fd/N``) name descriptors: the kernel follows those its caller passed (``caller_fds``).
- A file is created with ``O_EXCL | O_NOFOLLOW`` relative to its directory's handle; a file
  that already exists in a directory others can write is reused only when it is this user's
  and has no other hard link (a planted file, FIFO or hard link to a victim is refused).
- A directory the runner writes into must be owned by this user or root, or be writable by
  no one else; a private directory (the registry) must be this user's, not a link, on a path
  only this user and root can change.
- An existing file is judged before it is opened (an ``O_PATH`` handle, then ``/proc/self/fd/N``
  with ``O_NONBLOCK``; with no ``/proc``, its name in the held directory with ``O_NOFOLLOW``,
  checked to be the inode judged): a FIFO's open never waits for a reader, one no one reads is
  refused.

A directory checked once can be pinned (``pin``: a batch's ``--out``, ``report DIR``): later walks of paths
inside it start from its handle instead of walking from ``/`` again, so they use the very
directory that was checked. Walks of private directories never start from a pin.

A refusal is an ``UnsafePath`` (``pathtrust``, where the judgments of one file's owner and
mode live), an ``OSError`` whose ``strerror`` names the reason, so a caller's usual
``cannot ...: {strerror}`` message says why. Only ``os``, ``stat``, ``errno``, ``pathtrust``,
``caller_fds`` and ``pathreopen`` (opening again what a handle names) are imported: this is on a
plain run's path.
"""

from __future__ import annotations

import _thread
import errno
import os
import stat

from .caller_fds import refuse_unpassed
from .pathreopen import reopen
from .pathtrust import UnsafePath, check_existing, check_on_private_path, others_can_write, trusted

MAX_LINKS = 40  # the kernel's own limit on links followed in one resolution
_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_STICKY_WORLD = stat.S_ISVTX | stat.S_IWOTH
_proc_dev: list[int] = []


def _is_proc(found: os.stat_result) -> bool:
    if not _proc_dev:
        try:
            _proc_dev.append(os.stat("/proc").st_dev)
        except OSError:
            _proc_dev.append(-1)
    return found.st_dev == _proc_dev[0]


def _join(here: str, name: str) -> str:
    return here.rstrip("/") + "/" + name if here != "." else name


def _components(path: str) -> list[str]:
    """The names to walk, last first (a stack)."""
    return [part for part in reversed(path.split("/")) if part and part != "."]


def split_target(target: str) -> tuple[str, str]:
    """A link target's directory to walk (``.`` when none) and its last name, ``.`` where the
    target names a directory (``/``, ``LINK/..``: walked whole, so its ``..`` is judged there)."""
    stripped = target.rstrip("/") or "/."  # ``/``: the root, as ``/.``
    head, tail = (stripped, ".") if os.path.basename(stripped) == ".." else os.path.split(stripped)
    return head or ".", tail


def _climbs_above(parts: list[str]) -> bool:
    """Whether the names still to walk (a stack, last first) climb above where they start
    (after a link: above its target): a ``..`` more than the names before it."""
    depth = 0
    for part in reversed(parts):
        depth += -1 if part == ".." else 1
        if depth < 0:
            return True
    return False


def _follow(links: list[int], dir_fd: int, name: str, here: str, *, final=False, climbed=False) -> str | None:
    """The target to walk of the link ``name`` under ``dir_fd``, or None when the kernel follows
    it (``/proc``: a descriptor the caller passed, else OSError); UnsafePath when the rule refuses
    it. The ``final`` link (the file itself) must be this user's or root's wherever it is; so
    must a link ``climbed`` above (a ``..`` after it leaves its target), except in a sticky
    directory, whose rule already follows only this user's links and the directory owner's."""
    links[0] += 1
    if links[0] > MAX_LINKS:
        raise OSError(errno.ELOOP, f"too many levels of symbolic links at {_join(here, name)}")
    parent = os.fstat(dir_fd)
    link = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    uid = os.geteuid()
    sticky = parent.st_mode & _STICKY_WORLD == _STICKY_WORLD
    if (final or climbed and not sticky) and not trusted(link.st_uid):
        raise UnsafePath(
            f"{_join(here, name)} is a symbolic link of uid {link.st_uid}: a file is reached "
            f"through a link only when the link is this user's (uid {uid}) or root's"
        )
    if sticky and link.st_uid not in (uid, parent.st_uid):
        raise UnsafePath(
            f"{_join(here, name)} is a symbolic link of uid {link.st_uid} in the world-writable sticky "
            f"directory {here}: such a link is followed only when it is this user's (uid {uid}) or the "
            "directory owner's"
        )
    if not _is_proc(parent):
        return os.readlink(name, dir_fd=dir_fd)
    refuse_unpassed(dir_fd, name)
    return None


def _directory(
    links: list[int],
    start_fd: int | None,
    here: str,
    path: str,
    *,
    create_mode: int | None = None,
    created: list[str] | None = None,
    private: bool = False,
    strict: bool = False,
) -> tuple[int, str]:
    """A handle (``O_PATH``) on the directory ``path`` names from ``start_fd`` (None: the
    working directory), and its text; inside a pinned directory, walked from there.

    ``create_mode``: make missing components (``mkdirat``, never through a link), listing
    them in ``created``. ``private``: every directory on the way to the last must be
    changeable only by this user or root, and the last component must not be a link.
    ``strict``: every link on the way is followed only when it is this user's or root's.
    Whatever the options, so is a link a later ``..`` climbs above (``LINK/..``, ``LINK/x/../..``:
    to a place its owner chose; ``_follow``), an input's or an output's; not ``LINK/x/../y``."""
    pinned = _pinned_under(path) if _PINNED and start_fd is None and not private else None
    if pinned is not None:
        fd, here, path = pinned
    elif path.startswith("/"):
        fd, here = os.open("/", _DIR), "/"
    else:
        fd = os.open(".", _DIR) if start_fd is None else os.open(".", _DIR, dir_fd=start_fd)
    parts = _components(path)
    try:
        while parts:
            name = parts.pop()
            if private:
                check_on_private_path(fd, here)
            try:
                found = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if create_mode is None:
                    raise
                try:
                    os.mkdir(name, create_mode, dir_fd=fd)
                    if created is not None:
                        created.append(_join(here, name))
                except FileExistsError:
                    pass
                parts.append(name)
                continue
            except NotADirectoryError:
                if not stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise
                if private and not parts:
                    raise UnsafePath(f"{_join(here, name)} is a symbolic link") from None
                target = _follow(links, fd, name, here, final=strict, climbed=_climbs_above(parts))
                if target is not None:
                    if target.startswith("/"):
                        os.close(fd)
                        fd, here = os.open("/", _DIR), "/"
                    parts.extend(_components(target))
                    continue
                found = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd, here = found, os.path.normpath(_join(here, name))
        return fd, here
    except BaseException:
        os.close(fd)
        raise


def _file(
    links: list[int], dir_fd: int, here: str, name: str, flags: int, mode: int, existing: int, readable: bool = False
) -> tuple[int, bool | None]:
    """Open ``name`` under ``dir_fd`` for writing: ``(fd, created)``, ``created`` None for a
    ``/proc`` descriptor link's file (``open_unemptied``). ``links`` counts the links followed so
    far; ``readable``: one made here is opened to read as well (``create_file``)."""
    made = (flags & ~os.O_ACCMODE) | os.O_RDWR if readable else flags
    for _ in range(MAX_LINKS):
        try:
            fd = os.open(name, made | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
            return fd, True
        except FileExistsError:
            pass
        except OSError as exc:  # a write-only mount (FUSE) or a policy refusing the read: made to write alone
            if made == flags or exc.errno not in (errno.EACCES, errno.EOPNOTSUPP):
                raise
            made = flags
            continue
        try:  # O_PATH: judged before it is opened, since opening a FIFO would wait for a reader
            probe = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            continue  # removed since: create it again
        try:
            if stat.S_ISLNK(os.fstat(probe).st_mode):
                target = _follow(links, dir_fd, name, here, final=True)
                if target is None:  # a /proc descriptor link: the file is one its caller handed over
                    return reopen(os.open(name, os.O_PATH | os.O_CLOEXEC, dir_fd=dir_fd), flags | existing), None
                head, tail = split_target(target)
                link_dir, link_here = _directory(links, dir_fd, here, head)
                try:
                    if tail == "." or target.endswith("/"):  # after the walk: its links judged first
                        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), _join(here, name))
                    return _file(links, link_dir, link_here, tail, flags, mode, existing, readable)
                finally:
                    os.close(link_dir)
            check_existing(probe, dir_fd, _join(here, name))
        except BaseException:
            os.close(probe)
            raise
        return reopen(probe, flags | existing, _join(here, name), (dir_fd, name)), False
    raise OSError(errno.ELOOP, f"{_join(here, name)} keeps changing")


def split_file(path: str) -> tuple[str, str]:
    """``path``'s directory (``.`` when none) and last component; a path naming a directory is refused."""
    head, name = os.path.split(path)
    if name in ("", ".", ".."):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    return head or ".", name


def open_for_writing(path: str, flags: int = os.O_WRONLY, mode: int = 0o666, *, readable: bool = False) -> int:
    """Open (creating it if needed) the file ``path`` for writing under the rules above, and
    empty it when it is a regular file; raises OSError (UnsafePath included).
    ``readable``: as ``create_file``'s."""
    fd, created = open_unemptied(path, flags, mode, readable=readable)
    if not created and stat.S_ISREG(os.fstat(fd).st_mode):  # a file just created is empty
        try:
            os.ftruncate(fd, 0)
        except OSError:
            os.close(fd)
            raise
    return fd


def open_unemptied(
    path: str, flags: int = os.O_WRONLY, mode: int = 0o666, *, readable: bool = False
) -> tuple[int, bool | None]:
    """``open_for_writing``'s open, what the file holds left there: ``(fd, created)``, ``created``
    None where the file itself is a ``/proc`` descriptor link (``/dev/stdout``, ``/dev/fd/N``):
    one the caller handed over."""
    head, name = split_file(path)
    links = [0]
    dir_fd, here = _start(links, head)
    try:
        return _file(links, dir_fd, here, name, flags, mode, 0, readable)
    finally:
        os.close(dir_fd)


def _start(links: list[int], path: str, **options) -> tuple[int, str]:
    return _directory(links, None, ".", path, **options)


# A directory's path as given -> [a handle on it, the text its walk led to, how many pins hold it].
# Several batches may pin at once in one process (a Dask worker running chunks on two threads):
# the lock makes each pin and unpin one step, and keeps a handle open while a walk dups it.
_PINNED: dict[str, list] = {}
_PINNED_LOCK = _thread.RLock()  # re-entered: a pin's own walk looks for pins


def pin(path: str, judged: tuple[int, str] | None = None) -> None:
    """Walk the directory ``path`` once and start each later walk of a path inside it from its
    handle (a batch's ``--out``, under which every job makes five files), until ``unpin``. What
    was checked is still what is used: the handle is the directory the walk checked. ``judged``:
    its handle (consumed) and text, already walked and judged by the caller (``report DIR``'s).
    Where ``path`` is pinned already, that pin is held once more and ``judged`` is closed: it
    must be the same directory (else UnsafePath, nothing pinned), so the caller's walks still
    reach the directory it judged."""
    key = path.rstrip("/") or path
    with _PINNED_LOCK:
        if key in _PINNED:
            if judged is not None:
                held, given = os.fstat(_PINNED[key][0]), os.fstat(judged[0])
                os.close(judged[0])
                if (held.st_dev, held.st_ino) != (given.st_dev, given.st_ino):
                    raise UnsafePath(f"{key} is no longer the directory pinned by that name")
            _PINNED[key][2] += 1
            return
        fd, here = _start([0], key) if judged is None else judged
        _PINNED[key] = [fd, here, 1]


def unpin(path: str) -> None:
    key = path.rstrip("/") or path
    with _PINNED_LOCK:
        entry = _PINNED[key]
        entry[2] -= 1
        if not entry[2]:
            del _PINNED[key]
            os.close(entry[0])


def _pinned_under(path: str) -> tuple[int, str, str] | None:
    """A fresh handle on the pinned directory ``path`` lies in, its text, and the rest of ``path``;
    None when the rest climbs above it (``PIN/x/../..``): walked from its text, its links judged."""
    with _PINNED_LOCK:
        for key, (fd, here, _) in _PINNED.items():
            if path == key or path.startswith(key + "/"):
                rest = path[len(key) :]
                return None if _climbs_above(_components(rest)) else (os.open(".", _DIR, dir_fd=fd), here, rest)
    return None


def open_directory(path: str, *, created: list[str] | None = None) -> tuple[int, str]:
    """A checked handle on the directory ``path`` to create files in (``create_file``), and
    the text of where it led: owned by this user or root, or writable by no one else. Missing
    components are made, listed in ``created``; raises OSError (UnsafePath included)."""
    fd, here = _start([0], path, create_mode=0o777, created=created)
    found = os.fstat(fd)
    if not trusted(found.st_uid) and others_can_write(found):
        os.close(fd)
        raise UnsafePath(f"{path} belongs to uid {found.st_uid} and other users can write it")
    return fd, here


def create_file(
    dir_fd: int, here: str, name: str, flags: int, mode: int = 0o666, *, existing: int = 0, readable: bool = False
) -> tuple[int, bool | None]:
    """``(fd, created)`` for ``name`` in a directory from ``open_directory`` (through a link
    only when it is this user's or root's); ``existing`` flags are added when it exists.
    ``readable``: a file made here is opened read-write (its creator may, whatever mode the
    umask left it: a caller's ``0o477`` makes it write-only), so the runner can read back what
    it wrote (``readback``), or with ``flags`` alone where that is refused (a write-only FUSE
    mount, a security policy: ``EACCES``, ``EOPNOTSUPP``); one found there keeps ``flags`` (a
    FIFO opened to read would never refuse a missing reader)."""
    return _file([0], dir_fd, here, name, flags, mode, existing, readable)


def private_directory(path: str, *, create: bool, mode: int = 0o700) -> int | None:
    """A read handle on this user's own directory ``path``: not a link, owned by this user, on
    a path no one else can change. With ``create``, missing components are made (``mode``);
    without, a missing directory is None. Raises OSError (UnsafePath included)."""
    try:
        fd, _ = _start([0], path, create_mode=mode if create else None, private=True)
    except FileNotFoundError:
        if create:
            raise
        return None
    try:
        found = os.fstat(fd)
        if found.st_uid != os.geteuid():
            raise UnsafePath(f"{path} belongs to uid {found.st_uid}, not to this user (uid {os.geteuid()})")
        return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)


# -- the pieces ``userfiles`` builds its outputs from ----------------------------------------------
def directory_of(
    links: list[int], path: str, start_fd: int | None = None, here: str = ".", *, strict: bool = False
) -> tuple[int, str]:
    """An ``O_PATH`` handle on the directory ``path`` (walked from ``start_fd``, whose text is
    ``here``; None: the working directory) under the rules above, and its text; ``strict``:
    through links of this user's or root's only (inside a directory another user may own)."""
    return _directory(links, start_fd, here, path, strict=strict)


def follow_final(links: list[int], dir_fd: int, name: str, here: str) -> str | None:
    """The target of the link that is the file itself (None: a ``/proc`` descriptor link)."""
    return _follow(links, dir_fd, name, here, final=True)
