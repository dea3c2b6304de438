"""A run's directory on the host, ``<temp>/pkc-<token>/``: the one place that says whether the
run's runner is alive, so whatever the run leaves on the host can be reaped once it is not.

It holds ``live.lock`` (held by the runner for its whole life, see ``processkit.liveness``),
the control socket ``c.sock``, and for a process-group run ``pgroup`` (the group's identity).
The token also names the run's cgroups (``processkit-run-<token>``), so a group found in the
cgroup tree leads to the lock that speaks for it.

Facts about the evidence, and the order that keeps it sound:
- The temp directory is shared by every runner on the host that shares its file system, in
  any pid namespace, whatever registry directory each uses; a registry entry proves nothing
  about a run another registry holds, and a pid proves nothing about a runner in another pid
  namespace. The lock proves liveness in all those cases.
- The runner makes the directory, then takes the lock (and checks the file it locked is still
  the one named ``live.lock``), and only then creates its groups: no group of a live runner
  exists without its lock held. Between ``mkdir`` and the lock the directory has no lock file
  (a reaper reads that as "no evidence" and leaves it) or an unlocked one; a reaper that takes
  it in that moment removes it, and the runner, finding its lock unlinked, makes a fresh
  directory.
- The runner removes the directory last, after its groups, and a reaper removes it only once
  everything it speaks for has ended: evidence never goes before what it is evidence for.
- A directory with no lock file (made by an older version, or still being made) is never
  taken as dead: it is left and reported.
"""

from __future__ import annotations

import itertools
import os
import stat
import time

from .liveness import take

DIR_PREFIX = "pkc-"
SOCKET_NAME = "c.sock"
LOCK_NAME = "live.lock"
PGROUP_NAME = "pgroup"
GROUPS_NAME = "groups"  # the run's cgroup v1 groups, one path a line: they may sit where no reaper looks
GROUPS_LIMIT = 16 * 1024
CREATE_ATTEMPTS = 16
# Token characters, checked by hand: a regular expression would cost every run ``re``'s import.
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdef")
_LEGACY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_sequence = itertools.count()


def base() -> str:
    """``/tmp``, or the platform temp directory where ``/tmp`` is not a directory."""
    if os.path.isdir("/tmp"):
        return "/tmp"
    return os.environ.get("TMPDIR") or "/tmp"


def path_for(token: str) -> str:
    return os.path.join(base(), DIR_PREFIX + token)


def is_token(text: str) -> bool:
    """``<decimal pid>-<hex time>-<hex sequence>``, as ``new_token`` makes."""
    parts = text.split("-")
    return (
        len(parts) == 3
        and all(parts)
        and _DIGITS.issuperset(parts[0])
        and _HEX.issuperset(parts[1])
        and _HEX.issuperset(parts[2])
    )


def new_token() -> str:
    """A token no other run on the host has: this pid, the time, and a per-process sequence."""
    return f"{os.getpid()}-{time.time_ns():x}-{next(_sequence):x}"


class RunDir:
    """This runner's directory, its lock held until ``close``."""

    def __init__(self) -> None:
        """Make the directory and take its lock; raises OSError."""
        for _ in range(CREATE_ATTEMPTS):
            self.token = new_token()
            self.path = path_for(self.token)
            try:
                os.mkdir(self.path, 0o700)
            except FileExistsError:
                continue
            self._lock_fd = take(os.path.join(self.path, LOCK_NAME))
            if self._lock_fd is not None:
                return
            remove(self.path)
        raise FileExistsError(f"no fresh run directory under {base()} after {CREATE_ATTEMPTS} attempts")

    @property
    def socket_path(self) -> str:
        return os.path.join(self.path, SOCKET_NAME)

    def record_process_group(self, pgid: int, leader_start_time: str, session: int) -> None:
        """Write the identity of the run's process group, once, in one ``write``.
        (Failing, a reaper finds no group to end: the parent-death signal ends the leader.)"""
        self._record(PGROUP_NAME, f"{pgid} {leader_start_time} {session}\n")

    def record_groups(self, paths: list[str]) -> None:
        """Write where the run's cgroup v1 groups are, once: a runner in another v1 group (another
        user's session, another container) sweeps the hierarchies' shared parents but not this
        runner's own, and must still find them. (Failing, only this runner's kind finds them.)"""
        self._record(GROUPS_NAME, "".join(f"{path}\n" for path in paths))

    def _record(self, name: str, text: str) -> None:
        try:
            fd = os.open(os.path.join(self.path, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        try:
            os.write(fd, text.encode("utf-8", "surrogateescape"))
        except OSError:
            pass
        finally:
            os.close(fd)

    def close(self) -> None:
        """Remove the directory, then let the lock go. Idempotent."""
        if self._lock_fd is None:
            return
        remove(self.path)
        os.close(self._lock_fd)
        self._lock_fd = None


def private_owner(path: str) -> int | None:
    """The owner of a real (not symlinked) directory no one else may enter, else None."""
    try:
        found = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_mode & 0o077:
        return None
    return found.st_uid


def read_process_group(path: str) -> tuple[int, str, int] | None:
    """``(pgid, leader start time, session)`` as recorded, or None when absent or malformed."""
    try:
        with open(os.path.join(path, PGROUP_NAME), "rb") as handle:
            fields = handle.read(128).split()
    except OSError:
        return None
    if len(fields) != 3 or not all(field.isdigit() for field in fields):
        return None
    return int(fields[0]), fields[1].decode(), int(fields[2])


def read_groups(path: str) -> list[str]:
    """The recorded group paths (bounded, unchecked: the reaper decides what it may touch)."""
    try:
        with open(os.path.join(path, GROUPS_NAME), "rb") as handle:
            text = handle.read(GROUPS_LIMIT).decode("utf-8", "surrogateescape")
    except OSError:
        return []
    return [line for line in text.split("\n") if line]


def listing() -> list[str]:
    """Every directory in the temp dir with a run directory's name."""
    directory = base()
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [
        os.path.join(directory, name)
        for name in names
        if name.startswith(DIR_PREFIX) and is_token(name[len(DIR_PREFIX) :])
    ]


def reapable_dir(endpoint: str | None) -> str | None:
    """The run directory ``endpoint`` names, if it has exactly the shape a runner creates:
    ``<base>/pkc-<token>/c.sock`` taken as written (docs/control-plane.md §2.6)."""
    if not endpoint:
        return None
    directory, name = os.path.split(endpoint)
    parent, dirname = os.path.split(directory)
    if (
        name != SOCKET_NAME
        or parent != base()
        or not dirname.startswith(DIR_PREFIX)
        or len(dirname) == len(DIR_PREFIX)
        or not _LEGACY_CHARS.issuperset(dirname[len(DIR_PREFIX) :])
        or endpoint != f"{parent}/{dirname}/{SOCKET_NAME}"
    ):
        return None
    return directory


def remove(path: str) -> bool:
    """Whether the run directory is gone after this. Unlink the socket (only a socket), the group record and the lock inside a real (not
    symlinked) directory, then the directory; best effort."""
    try:
        dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        for name in (SOCKET_NAME, PGROUP_NAME, GROUPS_NAME, LOCK_NAME):
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
                if name != SOCKET_NAME or stat.S_ISSOCK(mode):
                    os.unlink(name, dir_fd=dir_fd)
            except OSError:
                pass
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    finally:
        os.close(dir_fd)
    return True
