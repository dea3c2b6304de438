"""File-level helpers shared by the cgroup v1 and v2 code: find the hierarchies, make, join,
read and remove a group."""

from __future__ import annotations

import errno
import os
import time

from ..plain import Plain

RMDIR_ATTEMPTS = 50
RMDIR_PAUSE_SECONDS = 0.01
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


def make_group(path: str, join_file: str = "cgroup.procs") -> int:
    """Create the group and return a write fd on its ``join_file`` (v1: ``tasks`` joins faster).

    The fd is opened now so the forked child can join by one ``write`` before exec. On failure
    nothing is left behind (a plain directory that is not a cgroup has no ``cgroup.procs``).
    """
    os.mkdir(path, 0o755)
    try:
        return os.open(os.path.join(path, join_file), os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        remove_group(path)
        raise


def join(procs_fd: int) -> None:
    """Move the calling process into the group (the kernel reads pid 0 as "myself")."""
    os.write(procs_fd, b"0")


READ_CHUNK = 64 * 1024


def read_text(path: str) -> str:
    """A cgroup file's text (``read_bytes``)."""
    return read_bytes(path).decode("utf-8", "surrogateescape")


def read_bytes(path: str) -> bytes:
    """A kernel file's bytes (cgroupfs, ``/proc``), read by plain ``open``/``read``/``close``: a
    run reads a dozen of these, and a buffered file adds an ``fstat``, a ``TCGETS`` and two
    ``lseek``s to each."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, READ_CHUNK)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def write_text(path: str, text: str) -> None:
    """One ``write`` of ``text`` (a cgroup file takes its value whole); the file is never created."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def read_keyed(path: str) -> dict[str, int]:
    """A flat-keyed file such as ``memory.events`` or ``cpu.stat``: one ``key value`` per line."""
    pairs = (line.split() for line in read_text(path).splitlines())
    return {fields[0]: int(fields[1]) for fields in pairs if len(fields) == 2}


def read_optional_int(path: str) -> int | None:
    """A single-number file, or None where this kernel does not provide it (not measured)."""
    try:
        return int(read_text(path))
    except FileNotFoundError:
        return None


def member_pids(path: str) -> list[int]:
    return [int(line) for line in read_text(os.path.join(path, "cgroup.procs")).split()]


def remove_group(path: str) -> None:
    """``rmdir`` the group, retrying while the kernel finishes exiting its last members (EBUSY)."""
    for _ in range(RMDIR_ATTEMPTS):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return
            time.sleep(RMDIR_PAUSE_SECONDS)
