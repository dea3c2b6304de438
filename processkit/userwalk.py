"""The walk to a name a user gives, as an input's is reached: ``final_entry`` follows a name's
own links by ``safepath``'s rules to the entry they end at (an ``O_PATH`` handle: nothing opened,
nothing waited on), and ``input_directory`` judges a directory named so (a run's ``--cwd``,
``report --capture-dir``). Apart from ``userfiles`` (which opens and bounds what it reaches) so a
run that names its working directory loads no more than the walk: ``userfiles`` pulls in
``bounded`` and ``text``, read from disk outside a plain run's start-up bundle."""

from __future__ import annotations

import errno
import os
import stat

from .safepath import directory_of, follow_final, split_target

_PROBE = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def input_entry(path: str) -> tuple[int, str, str, int, bool]:
    """``path`` reached by the walk: its directory's handle, its text, its name there, an ``O_PATH``
    handle on the entry (-1 when missing) and whether a ``/proc`` descriptor link led there (``final_entry``)."""
    links = [0]
    start, here = directory_of(links, _input_head(path, links))
    dir_fd, here, name, entry, by_descriptor = final_entry(links, start, here, os.path.basename(path))
    return dir_fd, f"{here.rstrip('/')}/{name}", name, entry, by_descriptor


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


def input_directory(path: str) -> tuple[int, str]:
    """An ``O_PATH`` handle on the directory ``path`` and its text, its last component reached as
    ``open_input`` reaches a file (another user's link at the name is refused, wherever it is,
    whatever it leads to, and so is one a later ``..`` climbs above: ``THEIRLINK/..``); NotADirectoryError
    for a file, ENOENT for an empty path."""
    name = _last_name(path)
    if name and os.path.basename(name) in ("", ".", ".."):  # ``/``, ``.``: no link at the name
        return directory_of([0], name)
    dir_fd, shown, _, entry, _ = input_entry(name)
    os.close(dir_fd)
    if entry < 0:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    if not stat.S_ISDIR(os.fstat(entry).st_mode):
        os.close(entry)
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
    return entry, shown


def _last_name(path: str) -> str:
    """``path`` without its trailing ``/`` and ``/.`` parts (``DIR/``, ``DIR/.``, ``DIR/./``
    name the link at DIR as well: its owner is judged as at ``DIR``)."""
    while len(path) > 1 and path.endswith("/") or len(path) > 2 and path.endswith("/."):
        path = path[:-1] if path.endswith("/") else path[:-2]
    return path


def final_entry(
    links: list[int], dir_fd: int, here: str, name: str, *, strict: bool = False
) -> tuple[int, str, str, int, bool]:
    """Follow ``name``'s links (safepath's rules for the file's own link) to the entry they end
    at: ``(its directory's handle, text, name, an O_PATH handle on it or -1 when missing,
    reached through a /proc descriptor link)``. ``dir_fd`` is consumed; ``strict``: the links
    in a target's directories too only when this user's or root's (one a later ``..`` climbs
    above always, as ``safepath.directory_of`` judges it)."""
    directory = False  # a target ending in ``/`` asks for a directory (``ln -s dir/ LINK``)
    try:
        while True:
            try:
                entry = os.open(name, _PROBE, dir_fd=dir_fd)
            except FileNotFoundError:
                return dir_fd, here, name, -1, False
            mode = os.fstat(entry).st_mode
            if not stat.S_ISLNK(mode):
                if directory and not stat.S_ISDIR(mode):
                    os.close(entry)
                    raise NotADirectoryError(errno.ENOTDIR, f"{here.rstrip('/')}/{name}: {os.strerror(errno.ENOTDIR)}")
                return dir_fd, here, name, entry, False
            os.close(entry)
            target = follow_final(links, dir_fd, name, here)
            if target is None:  # a descriptor this process holds: the kernel follows it
                return dir_fd, here, name, os.open(name, os.O_PATH | os.O_CLOEXEC, dir_fd=dir_fd), True
            directory = directory or target.endswith("/")
            head, tail = split_target(target)
            next_fd, here = directory_of(links, head, dir_fd, here, strict=strict)
            os.close(dir_fd)
            dir_fd, name = next_fd, tail
    except BaseException:
        os.close(dir_fd)
        raise
