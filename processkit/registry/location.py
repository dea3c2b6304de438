"""Where the per-user registry lives, and the two ways to open it (docs/control-plane.md §2.1).

A mutating open (``run``, ``doctor``) creates the directory 0700 and then always makes it 0700
again, repairing a widened directory of this user's own, whatever it was widened to (the
reference's rule, §2.1); a read-only open (every client) never creates or changes it, and a
missing directory is simply an empty registry. Both refuse a directory that is not this user's
own (a link, another user's directory, a path someone else can change) and a sticky one (``/tmp``,
``/dev/shm``, root's own included): that is a shared place or another user's trap, never
chmod-ed and never adopted
(``processkit.safepath``); a read-only open also refuses one of this user's that others can
still write into (not yet repaired by a run). A run that meets a refusal warns and runs
unregistered.
"""

from __future__ import annotations

import os
import stat

from ..errors import os_error_words
from ..pathtrust import UnsafePath, others_can_write
from ..safepath import private_directory

ENV_DIR = "PROCESSKIT_CLI_REGISTRY_DIR"


class RegistryError(Exception):
    """The registry cannot be located, prepared or read: a run warns and goes on unregistered,
    a client that reads it fails (111)."""


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
    """The registry directory, created 0700 if needed and made 0700 if it was not (a umask of
    022 leaves 0755: the reference's own suite makes its registries so). Refused, untouched,
    when it is not this user's own or other users can write into it: chmod-ing ``/tmp`` would
    lock every other user out of it, and what they planted there stays theirs.

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
            # This user's own directory (``private_directory`` checked the owner and the path): made
            # 0700 again whatever it was widened to, as the reference's §2.1 says, so that from
            # here on no one else can add to it; re-applied even when it is 0700, as the reference
            # does, so a registry that cannot take it (read-only) cannot be opened, as there. A
            # sticky one is a shared place by design (root's own ``/tmp``, ``/dev/shm``): never
            # chmod-ed, never adopted.
            mode = os.fstat(fd).st_mode & 0o7777
            if mode & stat.S_ISVTX:
                raise UnsafePath(f"{path} is a shared sticky directory (mode {mode:04o})")
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
    except UnsafePath as exc:  # this build's own refusal, not the system's: no errno to show
        raise RegistryError(_refused(path, exc)) from None
    except OSError as exc:  # the system's words and number, as the reference's open shows them
        raise RegistryError(os_error_words(exc)) from None
    _PREPARED.add(path)
    return path


def unreadable(exc: OSError) -> str:
    """The reference's words for a registry the system would not let it read (an ``io::Error``
    shown as Rust shows one: the system's words, then its number)."""
    return f"could not read the run registry: {os_error_words(exc)}"


def open_for_reading() -> str | None:
    """The registry directory, or None when it does not exist yet; this user's own only."""
    path = registry_dir()
    try:
        fd = private_directory(path, create=False)
    except UnsafePath as exc:  # this build's own refusal, not the system's: no errno to show
        raise RegistryError(_refused(path, exc)) from None
    except OSError as exc:
        raise RegistryError(unreadable(exc)) from None
    if fd is None:
        return None
    try:
        _not_shared(fd, path)
    except UnsafePath as exc:
        raise RegistryError(_refused(path, exc)) from None
    finally:
        os.close(fd)
    return path


def _refused(path: str, exc: UnsafePath) -> str:
    """A registry directory a client will not trust (a link, another user's, one others can write)."""
    return f"cannot open the registry directory {path}: {exc.strerror}"


def _not_shared(fd: int, path: str) -> int:
    """The mode of the registry directory ``fd``; refused when other users can write into it (a
    shared directory such as ``/tmp``, whose other files are not this user's to reap)."""
    found = os.fstat(fd)
    if others_can_write(found):
        raise UnsafePath(f"{path} is a directory other users can write into (mode {found.st_mode & 0o7777:04o})")
    return found.st_mode & 0o7777
