"""Where the per-user registry lives, and the two ways to open it (docs/control-plane.md §2.1).

A mutating open (``run``) creates the directory 0700 and refuses one that others can read or
write (it never chmods a directory); a read-only open (every client) never creates or changes
it, refuses one that others can write, and a missing directory is simply an empty registry. Both refuse a directory that is not this
user's own (a link, another user's directory, a path someone else can change): that is
another user's trap, not a registry (``processkit.safepath``).
"""

from __future__ import annotations

import os

from ..safepath import UnsafePath, others_can_write, private_directory

ENV_DIR = "PROCESSKIT_CLI_REGISTRY_DIR"


class RegistryError(Exception):
    """The registry cannot be located, prepared or read. ``unsafe``: refused because it is not
    this user's own (``safepath``), which a run treats as a setup error rather than a warning."""

    def __init__(self, message: str, *, unsafe: bool = False):
        super().__init__(message)
        self.unsafe = unsafe


def registry_dir() -> str:
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return explicit
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "processkit-cli", "runs")
    home = os.environ.get("HOME")
    if home:
        return os.path.join(home, ".local", "state", "processkit-cli", "runs")
    raise RegistryError(f"cannot locate the registry: none of {ENV_DIR}, XDG_RUNTIME_DIR or HOME is set")


_PREPARED: set[str] = set()  # the registry directories this process has checked and prepared


def open_for_writing() -> str:
    """The registry directory, created 0700 if needed; this user's own only, and refused when
    other users can read or write it: an existing directory is never chmod-ed, since the program
    cannot tell a registry it made from a directory it was pointed at (``$HOME``, ``/tmp``).

    Once per process and directory: a batch's jobs share the first check (a walk of every
    component, about thirty calls). That is sound because the check proved each component
    this user's and writable by no one else, so no one else can swap one afterwards."""
    path = registry_dir()
    if path in _PREPARED:
        return path
    try:
        fd = private_directory(path, create=True)
        assert fd is not None, "created when missing"
        try:
            mode = _not_shared(fd, path)
        finally:
            os.close(fd)
        if mode & 0o077:
            raise UnsafePath(f"its mode {mode:04o} lets other users in: chmod 700 it, or name another directory")
    except OSError as exc:
        reason = f"cannot prepare the registry directory {path}: {exc.strerror or exc}"
        raise RegistryError(reason, unsafe=isinstance(exc, UnsafePath)) from None
    _PREPARED.add(path)
    return path


def open_for_reading() -> str | None:
    """The registry directory, or None when it does not exist yet; this user's own only."""
    path = registry_dir()
    try:
        fd = private_directory(path, create=False)
    except NotADirectoryError:
        raise RegistryError(f"cannot open the registry directory {path}: not a directory") from None
    except OSError as exc:
        reason = f"cannot open the registry directory {path}: {exc.strerror or exc}"
        raise RegistryError(reason, unsafe=isinstance(exc, UnsafePath)) from None
    if fd is None:
        return None
    try:
        _not_shared(fd, path)
    except UnsafePath as exc:
        raise RegistryError(f"cannot open the registry directory {path}: {exc.strerror}", unsafe=True) from None
    finally:
        os.close(fd)
    return path


def _not_shared(fd: int, path: str) -> int:
    """The mode of the registry directory ``fd``; refused when other users can write into it (a
    shared directory such as ``/tmp``, whose other files are not this user's to reap)."""
    found = os.fstat(fd)
    if others_can_write(found):
        raise UnsafePath(f"{path} is a directory other users can write into (mode {found.st_mode & 0o7777:04o})")
    return found.st_mode & 0o7777
