"""File-level helpers shared by the cgroup v1 and v2 code: a run's groups' name, make, join,
read and remove a group, and the files of a group that serves many runs held open (``HeldFiles``,
for ``pool``); the hierarchies are found through ``mountinfo``."""

from __future__ import annotations

import errno
import os
import time

RUN_PREFIX = "processkit-run-"  # a run's groups are this and its run directory's token (``sweep``)
RMDIR_ATTEMPTS = 50
RMDIR_PAUSE_SECONDS = 0.01


def group_name(token: str) -> str:
    """The name of a run's groups, in every hierarchy: the run directory's token."""
    return RUN_PREFIX + token


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


def open_in(path: str, name: str, flags: int, parent_fd: int | None = None) -> int:
    """Open the file ``name`` of the group ``path``; through ``parent_fd``, a directory fd on the
    group's parent, where one is held (a pool's): the walk is then two components, not every
    directory of the cgroupfs path (each a dentry lookup and revalidation, about 1.7 µs here)."""
    if parent_fd is None:
        return os.open(os.path.join(path, name), flags)
    return os.open(f"{path.rpartition('/')[2]}/{name}", flags, dir_fd=parent_fd)  # a group's path never ends in /


def open_members(path: str, join_file: str = "tasks", parent_fd: int | None = None) -> int:
    """A read-write fd on an existing group's ``join_file``: read, it lists the members (an
    empty read: none); written, it joins as ``make_group``'s fd does."""
    return open_in(path, join_file, os.O_RDWR | os.O_CLOEXEC, parent_fd)


def v1_has_members(path: str, parent_fd: int | None = None) -> bool:
    """Whether a cgroup v1 group holds a task now, from its ``tasks`` opened afresh: a v1 group
    builds its member list when a reader first reads and keeps it, for every fd already open,
    as long as one reads it again within a second, so a held fd read again (``HeldFiles``) can
    show the list of an earlier read. (A v2 ``cgroup.procs`` and ``pids.current`` are read
    afresh through a held fd.)"""
    fd = open_members(path, parent_fd=parent_fd)
    try:
        return bool(os.pread(fd, 1, 0))
    finally:
        os.close(fd)


def join(procs_fd: int) -> None:
    """Move the calling process into the group (the kernel reads pid 0 as "myself")."""
    os.write(procs_fd, b"0")


READ_CHUNK = 64 * 1024
# A kernel ``seq_file`` read returns at most what its buffer (a page, 4 KiB or more) holds: a
# list such as ``cgroup.procs`` comes a page at a time (682 pids of 1501 in the first read here),
# so a short read is not the end of it. A read that did not fill the page, though, stopped
# because the records ran out: a full page holds more than a page less one record, and the
# longest record of a list read here is 8 bytes (a pid and its newline), of any other file the
# whole file (one record: ``single_open``, kernfs without ``seq_start``). So a read of at most
# ``WHOLE_BELOW`` bytes, fewer than asked for, is the whole file, with no second read to see EOF
# (every file a run reads is that short); a longer one is read on until a read returns nothing.
WHOLE_BELOW = 4096 - 256
# Past this a file is refused (OSError EFBIG), not cut short: the longest ``cgroup.procs`` or
# ``tasks`` the kernel can write, every pid below PID_MAX_LIMIT (2**22) at 8 bytes each.
READ_LIMIT = 8 << 22
# A held file's first read (``HeldFiles.content``): every file a lent group's run reads (a
# counter, a key or two, a switch) is shorter, and a buffer this size is the interpreter's
# small-object allocator's, where one of ``READ_CHUNK`` is a ``malloc`` and a shrinking
# ``realloc`` each read (about a dozen and a half a call of the API's service).
FIRST_READ = 256


def read_text(path: str) -> str:
    """A cgroup file's text (``read_bytes``)."""
    return read_bytes(path).decode("utf-8", "surrogateescape")


def read_bytes(path: str) -> bytes:
    """A kernel file's bytes (cgroupfs, ``/proc``), read by plain ``open``/``read``/``close``: a
    run reads a dozen of these, and a buffered file adds an ``fstat``, a ``TCGETS`` and two
    ``lseek``s to each. One read is the whole of a short file (``WHOLE_BELOW``)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return read_on(fd, os.read(fd, READ_CHUNK))
    finally:
        os.close(fd)


def read_on(fd: int, first: bytes) -> bytes:
    """The whole file: ``first``, its read from offset 0 (``READ_CHUNK`` asked for), then reads on
    from where it ended until one returns nothing (``WHOLE_BELOW``); raises OSError EFBIG past
    ``READ_LIMIT``."""
    if len(first) <= WHOLE_BELOW:
        return first
    chunks = [first]
    size = len(first)
    while chunk := os.pread(fd, READ_CHUNK, size):  # at the seq_file's own position: no rewalk
        size += len(chunk)
        if size > READ_LIMIT:
            raise OSError(errno.EFBIG, f"a kernel file longer than {READ_LIMIT} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


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


def text_in(where: str | HeldFiles, name: str) -> str:
    """The file ``name`` of a group: its directory, or its held files."""
    return where.text(name) if isinstance(where, HeldFiles) else read_text(os.path.join(where, name))


def optional_int_in(where: str | HeldFiles, name: str) -> int | None:
    """``read_optional_int`` of a group's file (``int`` reads the kernel's ASCII digits as bytes)."""
    try:
        return int(where.content(name) if isinstance(where, HeldFiles) else read_bytes(os.path.join(where, name)))
    except FileNotFoundError:
        return None


def keyed_in(where: str | HeldFiles, name: str) -> dict[str, int]:
    """``read_keyed`` of a group's file."""
    pairs = (line.split() for line in text_in(where, name).splitlines())
    return {fields[0]: int(fields[1]) for fields in pairs if len(fields) == 2}


def key_in(where: str | HeldFiles, name: str, key: str) -> int | None:
    """One key's value in a group's flat-keyed file (``keyed_in``), None where the file has no
    such line: found in the file's bytes, for a caller that needs one number of it at every
    run's end (no dictionary of the whole file made for it); raises ValueError for a value
    that is not a number."""
    content = where.content(name) if isinstance(where, HeldFiles) else read_bytes(os.path.join(where, name))
    needle = b"\n" + key.encode() + b" "
    at = content.find(needle)
    if at >= 0:
        start = at + len(needle)
    elif content.startswith(needle[1:]):
        start = len(needle) - 1
    else:
        return None
    end = content.find(b"\n", start)
    return int(content[start:] if end < 0 else content[start:end])


def populated(where: str | HeldFiles) -> bool:
    """Whether a v2 group's subtree may hold a process: not when its ``cgroup.events`` says
    ``populated 0`` (a file that says otherwise, or nothing of it, may)."""
    try:
        return key_in(where, "cgroup.events", "populated") != 0
    except ValueError:
        return True


def member_pids(path: str, name: str = "cgroup.procs") -> list[int]:
    """The group's own members (a v2 ``cgroup.procs`` lists no member of a group below it), or
    with ``name="cgroup.threads"`` its own threads."""
    return [int(line) for line in read_text(os.path.join(path, name)).split()]


def has_groups_below(path: str, dir_fd: int = -1) -> bool:
    """Whether a group has a group below it: a cgroupfs directory's link count is 2 plus its
    child groups (one ``fstat`` where a directory fd is held)."""
    found = os.fstat(dir_fd) if dir_fd >= 0 else os.stat(path)
    return found.st_nlink > 2


def below(path: str) -> list[str]:
    """The groups below ``path``, each before the group it is in: the order they can be removed
    in (``rmdir`` refuses a group with a group below it). A process of the run may make them
    (a delegated v2 group, or any group of a root child's), as deep as it likes: walked without
    recursion. A cgroupfs directory holds only its interface files and its child groups, so
    nothing here is a link to follow. A group that goes meanwhile, or cannot be listed, is
    passed over."""
    found: list[str] = []  # each group after the group it is in
    pending = [path]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                children = [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        found += children
        pending += children
    found.reverse()
    return found


# A group below read as listing none: one gone meanwhile (``ENODEV`` once removed), or a
# threaded group's ``cgroup.procs`` (``EOPNOTSUPP``: its processes are listed by its thread
# root, the nearest domain above).
_GONE = (errno.ENOENT, errno.ENODEV)  # a group gone meanwhile
_LISTS_NONE = (*_GONE, errno.EOPNOTSUPP)


def pids_below(path: str, name: str = "cgroup.procs", skip_unreadable: bool = False) -> list[int]:
    """The ids ``name`` lists in every group below ``path``: one gone meanwhile lists none, so it
    skips no other; one that cannot be read (``EACCES``: the child owns the groups it makes, and
    may close them to its runner) raises OSError, since its members would go uncounted and a
    tree holding them be said to be empty or fully listed. ``skip_unreadable``: it lists none
    too, for a caller that signals or kills what it can reach and counts nothing."""
    found: list[int] = []
    for group in below(path):
        try:
            found += member_pids(group, name)
        except OSError as exc:
            if exc.errno not in _LISTS_NONE and not skip_unreadable:
                raise
    return found


def subtree_ids(path: str, name: str = "cgroup.procs", skip_unreadable: bool = False) -> list[int]:
    """The ids ``name`` (``cgroup.procs``, or ``cgroup.threads``) lists in ``path`` and every
    group below it (looked for only where its link count shows one: a stat, not a listing);
    raises OSError when the group itself, or one below it, cannot be read (``pids_below``: not
    one below with ``skip_unreadable``)."""
    own = member_pids(path, name)
    return sorted(set(own + pids_below(path, name, skip_unreadable))) if has_groups_below(path) else own


def emptied(path: str, deadline: float) -> bool:
    """Whether the group and every group below it hold no process, looked at again (a pause
    between) until ``deadline`` (``time.monotonic``'s): a SIGKILLed member leaves its group only
    once it has run and exited, which a loaded host can put off for longer than
    ``remove_group``'s retries. A v2 group says it in its ``cgroup.events`` (``populated 0``), a
    v1 group by listing nobody; a group gone meanwhile is empty. A group that cannot be read
    raises OSError: its members unseen, it is no empty group (the caller says why it stays). A
    wait: never for a caller on a loop."""
    while True:
        try:
            try:
                held = populated(path)
            except FileNotFoundError:  # a v1 group (no ``cgroup.events``), or none left
                held = bool(subtree_ids(path, skip_unreadable=True))
        except OSError as exc:
            if exc.errno in _GONE:  # gone meanwhile: empty
                return True
            raise
        if not held or time.monotonic() >= deadline:
            return not held
        time.sleep(RMDIR_PAUSE_SECONDS)


def remove_group(path: str, attempts: int = RMDIR_ATTEMPTS) -> bool:
    """``rmdir`` the group and every group below it, deepest first, retrying (``attempts``
    passes, a pause between) while the kernel finishes exiting their last members (EBUSY);
    whether it is gone. A plain ``rmdir`` first (nothing below: the common case), the listing
    only when refused. One attempt never sleeps (for a caller on the loop, or the sweep)."""
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        pass
    for attempt in range(attempts):
        if attempt:
            time.sleep(RMDIR_PAUSE_SECONDS)
        for group in [*below(path), path]:
            try:
                os.rmdir(group)
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    return False
                break
        else:
            return True
    return False


class HeldFiles:
    """A group's interface files opened once and read again in place, for a group that serves
    many runs (``pool``): a ``pread`` at offset 0 makes a ``seq_file`` produce its content
    afresh, so each read is one system call instead of an ``open``, a ``read`` and a ``close``."""

    def __init__(self, path: str, parent_fd: int | None = None) -> None:
        self.path = path
        self._parent_fd = parent_fd  # opened through, as ``open_in`` says
        self._fds: dict[str, int] = {}
        self._checks: tuple[tuple[str, ...], tuple[tuple[int, int, bytes], ...]] | None = None  # ``same``'s reads

    def _fd(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is None:
            # Read-write where the file takes a write (a counter reset through the fd it is read by).
            mode = _HELD_MODES.get(name, os.O_RDONLY) | os.O_CLOEXEC
            fd = self._fds[name] = open_in(self.path, name, mode, self._parent_fd)
        return fd

    def content(self, name: str) -> bytes:
        fd = self._fds.get(name)
        if fd is None:
            fd = self._fd(name)
        chunk = os.pread(fd, FIRST_READ, 0)
        if len(chunk) < FIRST_READ:  # fewer than asked for, and short: the whole file (``WHOLE_BELOW``)
            return chunk
        return read_on(fd, os.pread(fd, READ_CHUNK, 0))  # a longer file read whole again, afresh

    def same(self, names: tuple[str, ...], contents: tuple[bytes, ...]) -> bool:
        """Whether each file of ``names`` holds exactly its bytes of ``contents``: each read asks
        for one byte more than expected, so a match is the whole file (a setting's file
        is one short record: ``WHOLE_BELOW``) and a longer file cannot match; raises OSError. The reads (each file's
        fd, size and bytes) are worked out once while the files stay open (a lent group is
        checked at every lend, with the same files and contents), not looked up at each."""
        checks = self._checks
        if checks is None or checks[0] is not names:
            reads = tuple((self._fd(name), len(expected) + 1, expected) for name, expected in zip(names, contents))
            checks = self._checks = (names, reads)
        pread = os.pread
        for fd, size, expected in checks[1]:
            if pread(fd, size, 0) != expected:
                return False
        return True

    def facts(self) -> os.stat_result:
        """The group directory's own facts (its link count: ``has_groups_below``), by ``fstat``
        on a held path fd: no walk from the parent each time."""
        fd = self._fds.get(".")
        return os.fstat(self._fd(".") if fd is None else fd)

    def text(self, name: str) -> str:
        return self.content(name).decode("utf-8", "surrogateescape")

    def number(self, name: str) -> int:
        return int(self.content(name))

    def write(self, name: str, text: str) -> None:
        os.pwrite(self._fd(name), text.encode(), 0)

    @property
    def count(self) -> int:
        """How many of its files are open now."""
        return len(self._fds)

    def close(self) -> None:
        self._checks = None
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}


# The group's own directory (``HeldFiles.facts``) is held as a path fd: fstat'ed, never read.
_HELD_MODES = {"cpuacct.usage": os.O_RDWR, "memory.max_usage_in_bytes": os.O_RDWR, ".": os.O_PATH | os.O_DIRECTORY}
