"""This process's mounts, read from ``/proc/self/mountinfo`` once per process: the cgroup code
finds its hierarchies here, and ``rundir`` whether ``/dev/shm`` is a tmpfs (Python has no statfs)."""

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
