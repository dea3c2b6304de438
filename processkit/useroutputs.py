"""Files a user names, written: an output written whole (``write_output``: bench's exports,
``report -o``, ``run --usage-file``; ``write_text``, the same for a command's page or export),
never through a path another user controls (``safepath``'s rules, the entry reached by
``userwalk.final_entry`` as an input's is) and never waiting in ``open()``.

Facts about writing that force the shape here:

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

from .errors import Failure, Kind, setup_failure
from .jsontext import lossy_utf8
from .writeall import write_all

from .pathtrust import UnsafePath, check_existing, trusted
from .pathreopen import reopen
from .safepath import directory_of, split_file
from .userwalk import final_entry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Mapping

STALL_SECONDS = 2.0  # a FIFO's or terminal's reader that takes nothing for this long fails the write
_UNNAMED = os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC
_NAMED = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_PROC_FDS = "/proc/self/fd"
_REFUSED = (errno.EACCES, errno.EPERM, errno.EROFS)  # no file may be made in the directory


def write_output(path: str, data: bytes, kept: Mapping[tuple[int, int], str] | None = None) -> None:
    """Write ``data`` as the whole content of ``path``: a regular file (or a missing one) is
    replaced atomically, anything else written in place; raises OSError (UnsafePath included).
    ``kept``: files the command read or wrote (an input, the run's stream) by ``(st_dev,
    st_ino)``, with what each is: never replaced by this output (``FileExistsError``)."""
    with _output_entry(path, kept) as (dir_fd, here, name, entry, by_descriptor, found, shown):
        if found is None or (stat.S_ISREG(found.st_mode) and not by_descriptor):
            refused = _replace(dir_fd, name, data, None if found is None else found.st_mode & 0o777)
            if refused is None:
                return
            if found is None:
                raise _no_file_made(refused, here)
        _in_place(entry, (dir_fd, name), found, shown, data)


def check_output(path: str) -> None:
    """Whether ``write_output`` could write ``path`` later, without writing it now (a file the
    user has there stays as it is): its entry judged, an unnamed file made and dropped in its
    directory, or an access check on a file written in place (a FIFO is not opened)."""
    with _output_entry(path, None) as (dir_fd, here, name, entry, by_descriptor, found, shown):
        if found is None or (stat.S_ISREG(found.st_mode) and not by_descriptor):
            refused = _cannot_create(dir_fd, name)
            if refused is None:
                return
            if found is None:
                raise _no_file_made(refused, here)
        if stat.S_ISFIFO(found.st_mode):
            return
        if not _writable(entry, dir_fd, name):
            raise PermissionError(errno.EACCES, f"{shown} is not writable")


def _no_file_made(code: int, here: str) -> OSError:
    """No file could be made in the directory ``here``: the errno the kernel gave the call that
    tried (``EROFS`` a read-only mount, ``EPERM`` an immutable directory, ``EACCES`` its mode),
    naming the directory."""
    return OSError(code, os.strerror(code), here)


def _writable(entry: int, dir_fd: int, name: str) -> bool:
    """``check_output``'s access check of the judged handle, through ``/proc/self/fd/N``; where
    ``/proc`` is missing (a batch whose jobs run elsewhere), by the entry's name in the directory
    walked, a check that follows a link put there since (a pre-check only: ``write_output``
    walks to the file and judges it again before it writes). Never with ``AT_SYMLINK_NOFOLLOW``:
    only the ``faccessat2`` call (Linux 5.8, glibc 2.33) takes it, and without that call glibc
    answers from the mode bits (a read-only mount ignored, root let in)."""
    try:
        os.lstat(f"{_PROC_FDS}/{entry}")
    except FileNotFoundError:
        return os.access(name, os.W_OK, dir_fd=dir_fd)
    return os.access(f"{_PROC_FDS}/{entry}", os.W_OK)


@contextlib.contextmanager
def _output_entry(path: str, kept: Mapping[tuple[int, int], str] | None):
    """An output's entry reached by safepath's rules (``userwalk.final_entry``'s answer), with its status
    (None: missing) and shown path, once found fit to be written: no directory, no file in
    ``kept``, no entry another user controls, no other user's FIFO; its handles closed after."""
    head, name = split_file(path)
    links = [0]
    start, here = directory_of(links, head)
    dir_fd, here, name, entry, by_descriptor = final_entry(links, start, here, name)
    try:
        found = os.fstat(entry) if entry >= 0 else None
        shown = f"{here.rstrip('/')}/{name}"
        if found is not None and stat.S_ISDIR(found.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))  # the frame names the path
        same = kept_as(found, kept) if kept else None
        if same is not None:
            raise FileExistsError(errno.EEXIST, f"it is {same}: not overwritten")  # the path said once
        if found is not None and not by_descriptor:
            check_existing(entry, dir_fd, shown)
            if stat.S_ISFIFO(found.st_mode) and not trusted(found.st_uid):
                raise UnsafePath(f"{shown} is a FIFO of uid {found.st_uid}: another user's FIFO is never written")
        yield dir_fd, here, name, entry, by_descriptor, found, shown
    finally:
        if entry >= 0:
            os.close(entry)
        os.close(dir_fd)


def _cannot_create(dir_fd: int, name: str) -> int | None:
    """Why no file can be made in ``dir_fd`` (the errno of a refusal, ``_REFUSED``), or None
    when one can: an unnamed one, else one named as ``_replace``
    names its temporary files for ``name`` (a writer killed before the unlink leaves one that
    ``_sweep_left`` removes), closed before it is unlinked (no ``.nfsXXXX`` on NFS)."""
    try:
        fd = _unnamed(dir_fd)
        if fd >= 0:
            os.close(fd)
            return None
        temporary = _temporary_name(name)
        os.close(os.open(temporary, _NAMED, 0o600, dir_fd=dir_fd))
        os.unlink(temporary, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _REFUSED:
            return exc.errno
        raise
    return None


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


def kept_as(found: os.stat_result | None, kept: Mapping[tuple[int, int], str]) -> str | None:
    """What the file ``found`` is among ``kept`` (``identities``), whatever name reached it (a
    hard link, a link's target), or None: the one judge of "these two are the same file" for an
    output written at the end and for a batch's reports refused before it starts."""
    if found is None or not stat.S_ISREG(found.st_mode):
        return None
    return kept.get((found.st_dev, found.st_ino))


def write_text(path: str, text: str, kept: Mapping[tuple[int, int], str] | None = None, what: str = "") -> None:
    """``text`` as the whole of ``path``, as ``write_output`` writes it, for a command that names
    the file (a page, an export, a trace): a failure is the ``setup`` failure naming the path
    (``what`` the file is: in the reference's frame, ``unwritable``)."""
    try:
        write_output(path, lossy_utf8(text), kept)  # a page or an export is for reading
    except OSError as exc:
        raise unwritable(path, exc, what and f"could not write {what}") from None


def check_text(path: str, what: str = "") -> None:
    """``check_output`` for a file ``write_text`` writes later: a failure is the same ``setup``
    failure naming the path, before anything ran."""
    try:
        check_output(path)
    except OSError as exc:
        raise unwritable(path, exc, what and f"could not open {what}") from None


def unwritable(path: str, exc: OSError, frame: str = "") -> Failure:
    """An output not written: with a ``frame`` (``could not write the usage file``), the
    reference's (the path once, in backticks, then the system's error with its number)."""
    if frame:
        return setup_failure(f"{frame} `{path}`", exc)
    return Failure(Kind.SETUP, f"cannot write {path}: {exc.strerror or exc}")


def _replace(dir_fd: int, name: str, data: bytes, mode: int | None, unnamed: bool = True) -> int | None:
    """Write a fresh file beside ``name`` and rename it over ``name``, with the ``mode`` of the
    file it replaces (a private 0600 file stays private): None once written, or the errno of
    the refusal (``_REFUSED``) when no file may be created there (then an existing file is
    written in place). The file is filled unnamed
    (``O_TMPFILE``) and named only just before the rename: a writer killed while filling it
    leaves nothing behind, so no write has to list the directory for leftovers (one killed in
    the two system calls between its naming and its rename leaves the named file). ``unnamed``
    False: named from the start, as where there is no ``/proc`` to name an unnamed file by."""
    temporary = _temporary_name(name)
    try:
        fd = _unnamed(dir_fd) if unnamed else -1
        named = fd < 0
        if named:
            fd = os.open(temporary, _NAMED, 0o666, dir_fd=dir_fd)  # the umask applies, as to any new file
    except OSError as exc:
        if exc.errno in _REFUSED:
            return exc.errno
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
    return None


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


def _temporary_name(name: str) -> str:
    """A writer's own temporary name beside ``name``: the prefix ``_sweep_left`` finds it by."""
    return f"{_temporary_prefix(name)}{os.getpid()}.{os.urandom(4).hex()}.tmp"


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
