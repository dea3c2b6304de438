"""A descriptor to read back a file the runner opened to write, never by the file's path: a
carrier's read-back of what a run it carried wrote (the API's runner service), and the
``run --detach`` launcher's read of its copy's proof in the stream it made (``cli.detach``).

- The file itself, whatever the child (or anyone) put at its name since.
- A file the runner made was opened read-write (``safepath.create_file``'s ``readable``): its
  descriptor reads it whatever mode the caller's umask gave it (``0o477`` makes it write-only
  on disk, ``0o777`` mode 000), so it is duplicated, never reopened (a reopen, by path or
  through ``/proc/self/fd``, is judged by that mode and refused).
- One found there (opened write-only) can only be reopened: that may be refused, and says so.
"""

from __future__ import annotations

import errno
import os
import stat

NO_FILE = -1  # no regular file (a FIFO's lines belong to its reader), or no descriptor to be had
UNREADABLE = -2  # a regular file this user may not read: the reader's result says so
REFUSED = (errno.EACCES, errno.EPERM)  # the file's mode (or a policy) refuses this user; not EMFILE and the like


def reader(fd: int) -> int:
    """A read descriptor (close-on-exec, the carrier's to close) on the file ``fd`` is open on,
    ``UNREADABLE`` where the file refuses it, else ``NO_FILE`` (no regular file, or none to be
    had: a full descriptor table, no memory, which say nothing of the file)."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return NO_FILE
        return same_file(fd, os.O_RDONLY)
    except OSError as exc:
        return UNREADABLE if exc.errno in REFUSED else NO_FILE


def same_file(fd: int, access: int) -> int:
    """A new close-on-exec descriptor on the file ``fd`` is open on, to read (``access``:
    ``O_RDONLY``) or to read and write (``O_RDWR``: a ring put in order in place,
    ``capture_keep``): a copy of ``fd`` where it reads and writes already (sharing its status
    flags, blocking or not), else the file reopened non-blocking through ``/proc/self/fd`` (no
    path to swap in between), which its mode may refuse."""
    import fcntl  # not at the module's import: a plain run never reads back (and the native module has fcntl's)

    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    return os.open(f"/proc/self/fd/{fd}", access | os.O_NONBLOCK | os.O_CLOEXEC)
