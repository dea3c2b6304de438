"""Files a user names: an output written whole (``write_output``: bench's exports, ``report -o``,
``run --usage-file``; ``write_text``, the same for a command's page or export) and an input opened
(``open_input``; ``open_named``, a file read where another user may have left links: a batch's
summary, ``--history``, a stream's capture in a directory given), never through a path another
user controls (``safepath``'s rules) and never waiting in ``open()``.

Facts about opening that force the shape here:

- ``open()`` of a FIFO waits for its other end (for writing, until a reader opens it), and no
  timer or signal handler that returns ends that wait. An ``O_PATH`` open names the inode without
  opening it: nothing waits and no device is touched. So the entry is reached by ``safepath``'s
  walk, opened ``O_PATH``, judged by ``fstat``, and only then opened for real through
  ``/proc/self/fd/N`` with ``O_NONBLOCK``: the file judged is the file opened.
- ``O_WRONLY | O_NONBLOCK`` on a FIFO no one reads fails (``ENXIO``): such a FIFO is refused, not
  waited for. A FIFO is written only when it is this user's or root's (or reached through a
  descriptor this process holds, ``/dev/fd/N``): the caller's own FIFO is a legitimate output,
  another user's never is.
- A rename replaces a name, whatever it was: over ``/dev/stdout`` it would put a regular file in
  place of the system's link. So only a regular file is replaced by a rename (a reader never sees
  half of it); a character device, a FIFO or a descriptor's file (``/dev/stdout``, ``/dev/fd/N``,
  ``/dev/null``) is written in place. A link is followed, under ``safepath``'s rules, never replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from .bounded import Limits, checked, file_kind
from .errors import Failure, Kind
from .text import sanitize
from .writeall import write_all

from .pathtrust import UnsafePath, check_existing, others_can_write, trusted
from .safepath import directory_of, follow_final, reopen, split_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Mapping

STALL_SECONDS = 2.0  # a FIFO's or terminal's reader that takes nothing for this long fails the write
_PROBE = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_INPUT = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_UNNAMED = os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC
_NAMED = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_PROC_FDS = "/proc/self/fd"


def kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    return file_kind(mode) or "a regular file"


def open_input(path: str, *, regular: bool = False, others_fifo: bool = False) -> int:
    """A read-only, non-blocking descriptor on ``path`` (a FIFO's open never waits for a
    writer), reached as ``open_named`` reaches a file: another user's link at the name, or in a
    sticky directory, is refused (it would choose what is read as this user and handed to a
    child), as is a file with other hard links in a directory other users can change, and
    another user's FIFO unless ``others_fifo`` (``--stdin-file``: a wait there is ended by the
    run's timeouts); with ``regular``, anything but a regular file is refused (OSError naming
    what it is). A name no file can have (empty, ending in ``/``) is refused with ``open``'s own
    words."""
    dir_fd, shown, entry, by_descriptor = _input_entry(path)
    try:
        fd = _reopened(dir_fd, shown, entry, by_descriptor, os.strerror(errno.ENOENT), others_fifo=others_fifo)
    finally:
        os.close(dir_fd)
    if regular:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, f"it is {kind(found.st_mode)}, not a regular file")
    return fd


def open_judged(path: str, limits: Limits) -> int:
    """``open_input``'s descriptor, judged by ``limits`` as ``bounded`` judges (``checked``): a
    batch's argument file, manifest or job input, read as the runner's user (often root) and
    turned into jobs or digests others may see. Raises OSError (UnsafePath included) or
    ``bounded.InputError``."""
    return checked(open_input(path), path, limits)


def _input_entry(path: str) -> tuple[int, str, int, bool]:
    """``path`` reached by the walk: its directory's handle, its text, an ``O_PATH`` handle on the
    entry (-1 when missing) and whether a ``/proc`` descriptor link led there (``_final``)."""
    links = [0]
    start, here = directory_of(links, _input_head(path, links))
    dir_fd, here, name, entry, by_descriptor = _final(links, start, here, os.path.basename(path))
    return dir_fd, f"{here.rstrip('/')}/{name}", entry, by_descriptor


def _input_head(path: str, links: list[int]) -> str:
    """``path``'s directory, for a path that names a file; else OSError as ``open(path)`` says
    it: ENOENT for an empty path, EISDIR for a directory's, ENOTDIR for a file's with a ``/``
    after it (the walk's own error)."""
    if not path:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    if os.path.basename(path) in ("", ".", ".."):  # ``LINK/``: the link is judged as at ``LINK``
        os.close(input_directory(path)[0])
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    return os.path.dirname(path) or "."


def input_stat(path: str) -> os.stat_result:
    """What ``open_input`` would open at ``path``, reached and judged as it is (the same
    refusals), by its ``O_PATH`` handle: nothing is opened, so a device named is not touched."""
    dir_fd, shown, entry, by_descriptor = _input_entry(path)
    try:
        return _judged(dir_fd, shown, entry, by_descriptor, os.strerror(errno.ENOENT))
    finally:
        if entry >= 0:
            os.close(entry)
        os.close(dir_fd)


def input_directory(path: str) -> tuple[int, str]:
    """An ``O_PATH`` handle on the directory ``path`` and its text, its last component reached as
    ``open_input`` reaches a file (another user's link at the name is refused, wherever it is,
    whatever it leads to); NotADirectoryError for a file, ENOENT for an empty path."""
    name = path.rstrip("/") or path  # ``DIR/`` names the link at DIR as well
    if name and os.path.basename(name) in ("", ".", ".."):  # ``/``, ``.``: no link at the name
        return directory_of([0], name)
    dir_fd, shown, entry, _ = _input_entry(name)
    os.close(dir_fd)
    if entry < 0:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    if not stat.S_ISDIR(os.fstat(entry).st_mode):
        os.close(entry)
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
    return entry, shown


def _reopened(
    dir_fd: int, shown: str, entry: int, by_descriptor: bool, missing: str, *, others_fifo: bool = False
) -> int:
    """The ``_final`` entry ``entry`` (consumed) reopened to read, non-blocking, once ``_judged``."""
    try:
        _judged(dir_fd, shown, entry, by_descriptor, missing, others_fifo=others_fifo)
        return reopen(os.dup(entry), _INPUT, shown, (dir_fd, os.path.basename(shown)))  # shown: here/name
    finally:
        if entry >= 0:
            os.close(entry)


def _judged(
    dir_fd: int, shown: str, entry: int, by_descriptor: bool, missing: str, *, others_fifo: bool = False
) -> os.stat_result:
    """The ``_final`` entry ``entry``'s ``fstat`` (-1: ``FileNotFoundError`` saying ``missing``).
    Refused: a file of this user's or root's with other hard links, in a directory other users
    can change (a link they made to a file they could not read); unless ``others_fifo``, another
    user's FIFO (its holder could keep a reader waiting for ever)."""
    if entry < 0:
        raise FileNotFoundError(errno.ENOENT, missing)
    found = os.fstat(entry)
    if not (by_descriptor or others_fifo) and stat.S_ISFIFO(found.st_mode) and not trusted(found.st_uid):
        raise UnsafePath(f"{shown} is a FIFO of uid {found.st_uid}: another user's FIFO is never read")
    folder = os.fstat(dir_fd)
    planted = not trusted(folder.st_uid) or others_can_write(folder)
    if not by_descriptor and planted and trusted(found.st_uid) and not stat.S_ISDIR(found.st_mode):
        if found.st_nlink > 1:
            raise UnsafePath(f"{shown} has other hard links, in a directory other users can change")
    return found


def open_named(path: str, limits: Limits, *, inside: str | None = None) -> int:
    """A read-only, non-blocking descriptor on the file ``path`` (relative to the directory
    ``inside`` when given), reached as an output is: another user's link at the name itself is
    never followed, nor one in a sticky directory. Inside ``inside`` (another user's batch
    directory, say) no link but this user's or root's is followed and no ``..`` is taken; and
    a file of this user's or root's with other hard links, in a directory other users can
    change, is refused (a link to a file they could not read). Then ``bounded`` judges it by
    ``limits``. Raises OSError (UnsafePath included) or ``bounded.InputError``."""
    links = [0]
    head, name = split_file(path)
    strict = inside is not None
    if inside is None:
        start, here = directory_of(links, head)
    else:
        if path.startswith("/") or ".." in path.split("/"):
            raise UnsafePath(f"{path} leads out of {inside}")
        base, base_here = directory_of(links, inside)
        try:
            start, here = directory_of(links, head, base, base_here, strict=True)
        finally:
            os.close(base)
    dir_fd, here, name, entry, by_descriptor = _final(links, start, here, name, strict=strict)
    shown = f"{here.rstrip('/')}/{name}"
    try:
        fd = _reopened(dir_fd, shown, entry, by_descriptor, f"{shown} does not exist")
    finally:
        os.close(dir_fd)
    return checked(fd, path, limits)


def write_output(path: str, data: bytes, kept: Mapping[tuple[int, int], str] | None = None) -> None:
    """Write ``data`` as the whole content of ``path``: a regular file (or a missing one) is
    replaced atomically, anything else written in place; raises OSError (UnsafePath included).
    ``kept``: files the command read or wrote (an input, the run's stream) by ``(st_dev,
    st_ino)``, with what each is: never replaced by this output (``FileExistsError``)."""
    with _output_entry(path, kept) as (dir_fd, here, name, entry, by_descriptor, found, shown):
        if found is None or (stat.S_ISREG(found.st_mode) and not by_descriptor):
            if _replace(dir_fd, name, data, None if found is None else found.st_mode & 0o777):
                return
            if found is None:
                raise PermissionError(errno.EACCES, f"cannot create a file in {here}")
        _in_place(entry, (dir_fd, name), found, shown, data)


def check_output(path: str) -> None:
    """Whether ``write_output`` could write ``path`` later, without writing it now (a file the
    user has there stays as it is): its entry judged, an unnamed file made and dropped in its
    directory, or an access check on a file written in place (a FIFO is not opened)."""
    with _output_entry(path, None) as (dir_fd, here, _, entry, by_descriptor, found, shown):
        if (found is None or (stat.S_ISREG(found.st_mode) and not by_descriptor)) and _can_create(dir_fd):
            return
        if found is None:
            raise PermissionError(errno.EACCES, f"cannot create a file in {here}")
        if not stat.S_ISFIFO(found.st_mode) and not os.access(f"{_PROC_FDS}/{entry}", os.W_OK):
            raise PermissionError(errno.EACCES, f"{shown} is not writable")


@contextlib.contextmanager
def _output_entry(path: str, kept: Mapping[tuple[int, int], str] | None):
    """An output's entry reached by safepath's rules (``_final``'s answer), with its status
    (None: missing) and shown path, once found fit to be written: no directory, no file in
    ``kept``, no entry another user controls, no other user's FIFO; its handles closed after."""
    head, name = split_file(path)
    links = [0]
    start, here = directory_of(links, head)
    dir_fd, here, name, entry, by_descriptor = _final(links, start, here, name)
    try:
        found = os.fstat(entry) if entry >= 0 else None
        shown = f"{here.rstrip('/')}/{name}"
        if found is not None and stat.S_ISDIR(found.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{shown} is a directory")
        if found is not None and kept and (found.st_dev, found.st_ino) in kept:
            raise FileExistsError(errno.EEXIST, f"{shown} is {kept[found.st_dev, found.st_ino]}: not overwritten")
        if found is not None and not by_descriptor:
            check_existing(entry, dir_fd, shown)
            if stat.S_ISFIFO(found.st_mode) and not trusted(found.st_uid):
                raise UnsafePath(f"{shown} is a FIFO of uid {found.st_uid}: another user's FIFO is never written")
        yield dir_fd, here, name, entry, by_descriptor, found, shown
    finally:
        if entry >= 0:
            os.close(entry)
        os.close(dir_fd)


def _can_create(dir_fd: int) -> bool:
    """Whether a file can be made in ``dir_fd``: an unnamed one (else a named one removed at once)."""
    try:
        fd = _unnamed(dir_fd)
        if fd < 0:
            temporary = f".{os.getpid()}.{os.urandom(4).hex()}.tmp"
            fd = os.open(temporary, _NAMED, 0o600, dir_fd=dir_fd)
            os.unlink(temporary, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return False
        raise
    os.close(fd)
    return True


def identities(named: Iterable[tuple[str, str]]) -> dict[tuple[int, int], str]:
    """``write_output``'s ``kept`` for files given by path, each with what it is; a path that
    cannot be looked at names nothing (``stat`` never waits, not even on a FIFO). Regular files
    only, as ``Emitter.identity``: only they are replaced, while a device or a pipe is written
    in place by each (``--trace /dev/null --junit /dev/null``, both at ``/dev/stdout``)."""
    found: dict[tuple[int, int], str] = {}
    for path, what in named:
        try:
            status = os.stat(path)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(status.st_mode):
            found.setdefault((status.st_dev, status.st_ino), what)
    return found


def write_text(path: str, text: str, kept: Mapping[tuple[int, int], str] | None = None) -> None:
    """``text`` as the whole of ``path``, as ``write_output`` writes it, for a command that names
    the file (a page, an export, a trace): a failure is the ``setup`` failure naming the path."""
    try:
        write_output(path, text.encode("utf-8"), kept)
    except OSError as exc:
        raise _unwritable(path, exc) from None


def check_text(path: str) -> None:
    """``check_output`` for a file ``write_text`` writes later: a failure is the same ``setup``
    failure naming the path, before anything ran."""
    try:
        check_output(path)
    except OSError as exc:
        raise _unwritable(path, exc) from None


def _unwritable(path: str, exc: OSError) -> Failure:
    return Failure(Kind.SETUP, f"cannot write {sanitize(path)}: {exc.strerror or exc}")


def _final(
    links: list[int], dir_fd: int, here: str, name: str, *, strict: bool = False
) -> tuple[int, str, str, int, bool]:
    """Follow ``name``'s links (safepath's rules for the file's own link) to the entry they end
    at: ``(its directory's handle, text, name, an O_PATH handle on it or -1 when missing,
    reached through a /proc descriptor link)``. ``dir_fd`` is consumed; ``strict``: the links
    in a target's directories too only when this user's or root's."""
    try:
        while True:
            try:
                entry = os.open(name, _PROBE, dir_fd=dir_fd)
            except FileNotFoundError:
                return dir_fd, here, name, -1, False
            if not stat.S_ISLNK(os.fstat(entry).st_mode):
                return dir_fd, here, name, entry, False
            os.close(entry)
            target = follow_final(links, dir_fd, name, here)
            if target is None:  # a descriptor this process holds: the kernel follows it
                return dir_fd, here, name, os.open(name, os.O_PATH | os.O_CLOEXEC, dir_fd=dir_fd), True
            head, tail = os.path.split(target)
            if not tail:
                raise IsADirectoryError(errno.EISDIR, f"{here.rstrip('/')}/{name} names a directory")
            next_fd, here = directory_of(links, head or ".", dir_fd, here, strict=strict)
            os.close(dir_fd)
            dir_fd, name = next_fd, tail
    except BaseException:
        os.close(dir_fd)
        raise


def _replace(dir_fd: int, name: str, data: bytes, mode: int | None, unnamed: bool = True) -> bool:
    """Write a fresh file beside ``name`` and rename it over ``name``, with the ``mode`` of the
    file it replaces (a private 0600 file stays private): False when this user may not create
    files there (then an existing file is written in place). The file is filled unnamed
    (``O_TMPFILE``) and named only just before the rename: a writer killed while filling it
    leaves nothing behind, so no write has to list the directory for leftovers (one killed in
    the two system calls between its naming and its rename leaves the named file). ``unnamed``
    False: named from the start, as where there is no ``/proc`` to name an unnamed file by."""
    temporary = f"{_temporary_prefix(name)}{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        fd = _unnamed(dir_fd) if unnamed else -1
        named = fd < 0
        if named:
            fd = os.open(temporary, _NAMED, 0o666, dir_fd=dir_fd)  # the umask applies, as to any new file
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return False
        raise
    ours = named  # the temporary name is this write's to remove
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            write_all(fd, data, STALL_SECONDS)
            now = os.fstat(fd).st_mtime
            if not named:
                try:
                    os.link(f"{_PROC_FDS}/{fd}", temporary, dst_dir_fd=dir_fd)  # linkat, AT_SYMLINK_FOLLOW
                    ours = True
                except FileNotFoundError:  # no /proc: the file is written again, named
                    pass
        finally:
            os.close(fd)
        if not ours:
            return _replace(dir_fd, name, data, mode, unnamed=False)
        os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            if ours:
                os.unlink(temporary, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    if named:
        _sweep_left(dir_fd, name, now)
    return True


def _unnamed(dir_fd: int) -> int:
    """An unnamed file in ``dir_fd`` (``O_TMPFILE``, the umask applies), or -1 on a file system
    without ``O_TMPFILE`` (no ``/proc`` to link it by is found at the link: ``_replace``)."""
    try:
        return os.open(".", _UNNAMED, 0o666, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return -1
        raise


def _temporary_prefix(name: str) -> str:
    return f".{name[:200]}."


def _sweep_left(dir_fd: int, name: str, now: float) -> None:
    """Remove the temporary files of ``name`` that writers killed mid-write left beside it (on
    the named path only: where a file system has no ``O_TMPFILE``)
    (``freshnames.sweep``: only this user's regular files with no other link, stale by the
    file system's clock read off the file just written); nothing else would ever remove them."""
    from .freshnames import fresh_of, sweep

    prefix = _temporary_prefix(name)
    sweep(dir_fd, lambda entry: fresh_of(entry, prefix, "."), now)


def _in_place(entry: int, at: tuple[int, str], found: os.stat_result, shown: str, data: bytes) -> None:
    fd = reopen(os.dup(entry), os.O_WRONLY | os.O_NONBLOCK, shown, at)
    try:
        if stat.S_ISREG(found.st_mode):
            os.ftruncate(fd, 0)
        write_all(fd, data, STALL_SECONDS)
    finally:
        os.close(fd)
