"""This process's mounts, read from ``/proc/self/mountinfo`` once per process: the cgroup code
finds its hierarchies here, ``rundir`` whether ``/dev/shm`` is a tmpfs (Python has no statfs),
and every runner whether the ``/proc`` it reads is its own pid namespace's (``foreign_proc``)."""

from __future__ import annotations

import os

from .plain import Plain

MOUNTINFO = "/proc/self/mountinfo"
# The kernel writes a space, tab, newline or backslash in a mountinfo path as a 3-digit octal escape.
_OCTAL_ESCAPE = r"\\([0-7]{3})"


class Mount(Plain):
    __slots__ = ("root", "mount_point", "fstype", "super_options")

    def __init__(self, root: str, mount_point: str, fstype: str, super_options: str):
        self.root = root  # the directory of the mounted file system that appears at mount_point
        self.mount_point = mount_point
        self.fstype = fstype
        self.super_options = super_options  # for a cgroup v1 hierarchy, its controllers among them


PROC_SELF = "/proc/self"
# The fix named to a runner whose /proc is another pid namespace's (``foreign_proc``).
PROC_FIX = (
    "mount a /proc of this pid namespace (unshare --mount-proc, or mount -t proc proc /proc in a new mount namespace)"
)
# The fix named where the API's caller is outside the pid namespace its service is the init of
# (``unshare --pid`` without ``--fork``): a /proc mounted there (``unshare --mount-proc`` too)
# is the caller's namespace's, never the service's.
PROC_FIX_CALLER = (
    "the API's service is its pid namespace's init, its caller outside it: run the caller inside the"
    " namespace with a /proc of its own (unshare --pid --fork --mount-proc)"
)
# Set (``caller_is_outside``) in that service and the processes it starts.
_CALLER_OUTSIDE: list[bool] = []
# The fix named where /proc shows no process at all here (none mounted, a tmpfs over it).
PROC_MOUNT = "mount one: mount -t proc proc /proc"
# ``foreign_proc``'s answer, found once a process: a forked child (perhaps into a new pid
# namespace, after ``unshare(CLONE_NEWPID)``) looks again, with no ``getpid`` a call (a batch
# asks once a job).
_PROC_LOOKED: list[str | None] = []
os.register_at_fork(after_in_child=_PROC_LOOKED.clear)

_MOUNTS: dict[str, list[Mount]] = {}  # path -> its mounts: a run reads them once, for v2 and v1 alike


def mounts(path: str = MOUNTINFO) -> list[Mount]:
    """This process's mounts, paths decoded, read once per process; raises OSError when unreadable.

    A line is ``id parent dev root mount-point options [optional...] - fstype source super``;
    the optional fields vary in number, so the fields after them are found from the ``-``.
    """
    if path not in _MOUNTS:
        _MOUNTS[path] = _read_mounts(path)
    return _MOUNTS[path]


def _read_mounts(path: str) -> list[Mount]:
    found = []
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            fields = line.split()
            dash = fields.index("-")
            found.append(Mount(_unescape(fields[3]), _unescape(fields[4]), fields[dash + 1], fields[dash + 3]))
    return found


def _unescape(field: str) -> str:
    if "\\" not in field:  # the common case, which spares every run the ``re`` import
        return field
    import re

    return re.sub(_OCTAL_ESCAPE, lambda match: chr(int(match[1], 8)), field)


def filesystem_type(path: str) -> str | None:
    """The type of the file system ``path`` lies on (the last mount over it is the one in force);
    None when the mounts cannot be read."""
    try:
        found = mounts()
    except OSError:
        return None
    target, fstype = os.path.realpath(path), None
    for mount in found:
        point = mount.mount_point
        if target == point or target.startswith(point.rstrip("/") + "/"):
            fstype = mount.fstype
    return fstype


def foreign_proc() -> str | None:
    """Why the ``/proc`` mounted here cannot be trusted, or None when it shows this process by
    its own pid; looked at once a process (one ``readlink``), again in a forked child.

    A runner's pids (its children's, a cgroup's members', a kill's target) are its own pid
    namespace's, and ``/proc`` numbers processes in the namespace of whoever mounted it: under
    ``unshare --pid --fork`` without ``--mount-proc``, ``/proc/2`` is the host's ``kthreadd``,
    not the run's child. ``/proc/self`` names this process in the mount's numbering, so any pid
    other than ``os.getpid()`` (or none: a namespace that cannot see this process) says so.
    """
    if not _PROC_LOOKED:
        _PROC_LOOKED.append(_proc_mismatch(os.getpid()))
    return _PROC_LOOKED[0]


def _proc_mismatch(own: int) -> str | None:
    try:
        seen = os.readlink(PROC_SELF)
    except OSError as exc:  # no /proc, a tmpfs over it, or one whose namespace cannot see this process
        return (
            f"/proc is not mounted here or does not show this process (/proc/self: {exc.strerror or exc}); {PROC_MOUNT}"
        )
    if seen == str(own):
        return None
    fix = PROC_FIX_CALLER if _CALLER_OUTSIDE else PROC_FIX
    return (
        f"/proc belongs to another pid namespace than this process's (/proc/self is {seen},"
        f" this process is pid {own}), so its pids name other processes; {fix}"
    )


def caller_is_outside() -> None:
    """Called in the API's service where it is its pid namespace's init (its caller, outside,
    forked it first there), and in the processes it starts: the refusal names the caller's fix."""
    _CALLER_OUTSIDE[:] = [True]


def refuse_foreign_proc() -> None:
    """A command that runs jobs (``batch``, ``bench``) refused up front, as a containment
    failure (102), where its runs would read another namespace's ``/proc``: each would fail
    alone otherwise, and the command end as its jobs' failure instead of naming the cause."""
    why = foreign_proc()
    if why is not None:
        from .errors import Failure, Kind

        raise Failure(Kind.CONTAINER_ERROR, why)
