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
- The runner removes the directory last, after its groups, and keeps it (its lock let go) when
  its release could not remove one, so a sweep ends that (``RunDir.close``); a reaper removes
  it only once everything it speaks for has ended: evidence never goes before what it is
  evidence for (without it nothing could ever prove the group's runner dead).
- A directory with no lock file (made by an older version, or still being made) is never
  taken as dead: it is left and reported.

Facts about where a batch's directory goes (``batch_base``), and why not beside ``run``'s:
- ``/tmp``, ``$HOME`` and ``/`` are often one ext4 file system, and on an ext4 without a journal
  the inode allocator skips every inode of a block group freed in the last 60 s (360 s while its
  table block is dirty), one buffer lookup each: every file made and removed makes every later
  creation there slower (many times a creation on tmpfs; bench/README.md has the figures). A batch
  making and removing a socket, a lock and records per job is exactly that churn.
- So a batch makes ONE directory for its whole life (``RunDir``, its lock held throughout), and
  its jobs take slots in it (``JobSlot``: ``j<seq>.sock``, ``.json``, ``.ended``, ``.pgroup``,
  ``.groups``); the directory sits on a tmpfs when one is usable: ``$XDG_RUNTIME_DIR`` when it
  is set and is this user's own private directory (pam_systemd's, a tmpfs), else ``/dev/shm``
  when it is a tmpfs directory, sticky and root's (so no one else can rename or remove what we
  make there, as in ``/tmp``), else ``base()``. ``run`` keeps ``base()``, then ``temp_dir()``
  where ``base()`` cannot hold its directory, as the reference places its socket's.
- Every reaper looks in each of ``bases()``, since a batch may have used any of them.
- A job's groups are named ``processkit-run-<batch token>.j<seq>`` (``group_token``), so a group
  left by a killed batch leads to the batch's lock, which speaks for every job of it. The groups
  its host reuses from job to job (``containment.pool``, held in ``RunDir.holds``) are named the
  same way, from a sequence of their own, and recorded as ``j<seq>.groups`` too.
"""

from __future__ import annotations

import os
import stat
import time

from .liveness import take
from .mountinfo import filesystem_type
from .plain import counter
from .writeall import write_all

DIR_PREFIX = "pkc-"
SOCKET_NAME = "c.sock"
JOB_SEPARATOR = ".j"  # a batch job's group token: <batch token>.j<seq>
JOB_SUFFIXES = (".sock", ".json", ".ended", ".pgroup", ".groups")  # what a job slot may leave in its directory
LOCK_NAME = "live.lock"
PGROUP_NAME = "pgroup"
GROUPS_NAME = "groups"  # the run's cgroup v1 groups, one path a line: they may sit where no reaper looks
SWEEPING_NAME = "sweeping"  # an older version's sweep's mark in a dead run's directory: removed with it
DEAD_NAME = "dead"  # its time: when a run's sweep first found the run dead (``containment.sweep_mark.dead_for``)
CREATE_ATTEMPTS = 16
# Token characters, checked by hand: a regular expression would cost every run ``re``'s import.
_DIGITS = frozenset("0123456789")
HEX_DIGITS = frozenset("0123456789abcdef")
_sequence = counter()
_TMPFS: dict[str, bool] = {}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class Closing(Protocol):
        def close(self) -> None: ...

    class Remaining(Protocol):
        def remaining(self) -> list[str]: ...


def base() -> str:
    """``/tmp``, or the platform temp directory where ``/tmp`` is not a directory."""
    if os.path.isdir("/tmp"):
        return "/tmp"
    return temp_dir()


def temp_dir() -> str:
    """The platform temp directory (``$TMPDIR``, else ``/tmp``): the reference's second base, where
    a run's directory goes when ``/tmp`` cannot hold it, and so one every reaper looks in. Taken
    only when absolute and no one else can rename or remove what we make there (as
    ``batch_base``'s): in another user's ``$TMPDIR`` they could swap our directory for theirs."""
    found = os.path.normpath(os.environ.get("TMPDIR") or "/tmp")
    if found == "/tmp":  # the usual answer: no look at who may write there
        return found
    if os.path.isabs(found) and (_own_private(found) or _sticky_root(found)):
        return found
    return "/tmp"


# The label every job of a batch and the batch's own record carry (``batch=<its label>``): what
# ``list --label`` and ``wait --label`` find its jobs by, and a Dask read-back tells its own streams by.
BATCH_LABEL = "batch"


def batch_base() -> str:
    """Where a batch's one directory goes: a tmpfs of this user's or a sticky root tmpfs when
    there is one, else ``base()`` (see the facts above)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and _own_private(runtime):
        return runtime
    if _is_tmpfs("/dev/shm") and _sticky_root("/dev/shm"):
        return "/dev/shm"
    return base()


def bases() -> list[str]:
    """Every directory a run's or a batch's directory may be in, ``base()`` first."""
    return list(dict.fromkeys([base(), batch_base(), temp_dir()]))


def _own_private(path: str) -> bool:
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid() and not found.st_mode & 0o077


def _sticky_root(path: str) -> bool:
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == 0 and bool(found.st_mode & stat.S_ISVTX)


def _is_tmpfs(path: str) -> bool:
    """Whether ``path`` is on a tmpfs (statfs's ``TMPFS_MAGIC``, as mountinfo names it); looked
    up once per process."""
    if path not in _TMPFS:
        _TMPFS[path] = filesystem_type(path) == "tmpfs"
    return _TMPFS[path]


def locate(token: str, where: list[str] | None = None) -> tuple[str, int | None]:
    """The run directory of ``token`` in whichever of ``where`` (``bases()`` when None) holds it,
    this user's before another's, else in the first of them; and its owner when it is a real (not
    symlinked) directory no one else may enter, else None. This user's first: another user can
    make ``pkc-<token>`` in a sticky base (``/tmp``) where a batch of this user's has its
    directory in a later one (``/dev/shm``), the token read from any job's ``/proc/<pid>/cgroup``;
    taken, theirs would speak for the batch's groups, and a dead batch's tree would be left. One
    ``lstat`` for each base looked in, this user's found first: a sweep probes every run whose
    group it finds, most often on the way into a run, with the bases looked up once."""
    where = where or bases()
    name = DIR_PREFIX + token
    other = None  # the first directory of that name of another user's: a later base may hold this user's
    for directory in where:
        # os.path.join's answer without its generic steps (a sweep probes every run it finds)
        path = directory + name if not directory or directory[-1] == "/" else f"{directory}/{name}"
        try:
            found = os.lstat(path)
        except OSError:
            continue
        if found.st_uid == os.geteuid():
            return path, _private_owner(found)
        other = other or (path, _private_owner(found))
    return other or (os.path.join(where[0], name), None)


def group_token(text: str) -> str | None:
    """The run directory token a group's token speaks through: itself for a run, the batch's for
    a batch job (``<batch token>.j<hex seq>``); None for a name no runner makes."""
    owner, separator, seq = text.partition(JOB_SEPARATOR)  # no run's own token holds the separator
    if not separator:
        return text if is_token(text) else None
    return owner if seq and HEX_DIGITS.issuperset(seq) and is_token(owner) else None


def is_token(text: str) -> bool:
    """``<decimal pid>-<hex time>-<hex sequence>``, as ``new_token`` makes."""
    parts = text.split("-")
    return (
        len(parts) == 3
        and all(parts)
        and _DIGITS.issuperset(parts[0])
        and HEX_DIGITS.issuperset(parts[1])
        and HEX_DIGITS.issuperset(parts[2])
    )


def new_token() -> str:
    """A token no other run on the host has: this pid, the time, and a per-process sequence."""
    return f"{os.getpid()}-{time.time_ns():x}-{next(_sequence):x}"


class RunDir:
    """This runner's directory, its lock held until ``close``. ``holds``: what outlives each of
    its runs and is evidenced by its lock (a lodged host's idle cgroups, ``containment.pool``),
    by name; each is closed before the directory goes."""

    holds_jobs = False  # a batch's (``control.lodging``) has job slots' files to remove too

    def __init__(self, where: str | None = None) -> None:
        """Make the directory (in ``where``, else ``base()``, then ``temp_dir()`` where that one
        cannot hold it, as the reference places its socket's) and take its lock; raises OSError.
        A directory made whose lock cannot be (``/tmp`` full: another user can fill it) is
        removed: no reaper takes one without a lock, so it would stay for ever."""
        self.holds: dict[str, Closing] = {}
        self._holders: list[Remaining] = []  # ``speaks_for``
        self._left: list[str] = []  # its job slots' groups that outlived their jobs (``JobSlot.close``)
        if where is not None:
            self._make(where)
            return
        try:
            self._make(base())
        except OSError:
            fallback = temp_dir()  # judged only here: a plain run's directory costs no look at $TMPDIR
            if fallback == base() or not os.path.isdir(fallback):
                raise
            self._make(fallback)

    def _make(self, where: str) -> None:
        for _ in range(CREATE_ATTEMPTS):
            self.token = new_token()
            self.path = os.path.join(where, DIR_PREFIX + self.token)
            try:
                os.mkdir(self.path, 0o700)
            except FileExistsError:
                continue
            try:
                self._lock_fd = take(os.path.join(self.path, LOCK_NAME))
            except OSError:
                try:
                    os.rmdir(self.path)  # still empty: no one else can write a 0700 directory of ours
                except OSError:
                    pass
                raise
            if self._lock_fd is not None:
                return
            remove(self.path)
        raise FileExistsError(f"no fresh run directory under {where} after {CREATE_ATTEMPTS} attempts")

    def _name(self, name: str) -> str:
        return name

    def _recorded(self, name: str) -> None:
        """``name`` was made (the directory's ``close`` removes every name it may hold)."""

    @property
    def socket_path(self) -> str:
        return os.path.join(self.path, SOCKET_NAME)

    def record_process_group(self, pgid: int, leader_start_time: str, session: int) -> None:
        """Write the identity of the run's process group, once, in one ``write``.
        (Failing, a reaper finds no group to end: the parent-death signal ends the leader.)"""
        self._record(self._name(PGROUP_NAME), f"{pgid} {leader_start_time} {session}\n")

    def record_groups(self, paths: list[str]) -> None:
        """Write where the run's cgroup v1 groups are, once: a runner in another v1 group (another
        user's session, another container) sweeps the hierarchies' shared parents but not this
        runner's own, and must still find them. (Failing, only this runner's kind finds them.)"""
        self._record(self._name(GROUPS_NAME), "".join(f"{path}\n" for path in paths))

    def _record(self, name: str, text: str) -> None:
        try:
            fd = os.open(os.path.join(self.path, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        self._recorded(name)
        try:
            write_all(fd, text.encode("utf-8", "surrogateescape"))
        except OSError:
            pass
        finally:
            os.close(fd)

    def speaks_for(self, holder: Remaining) -> None:
        """``holder``'s groups (a run's container) are this directory's to speak for: it stays
        while ``holder.remaining()`` names one (read at ``close``, from memory)."""
        self._holders.append(holder)

    def remaining(self) -> list[str]:
        """Its holders' groups still on the host, as they know it (none once released)."""
        return [path for holder in self._holders for path in holder.remaining()]

    def close(self) -> None:
        """Close what it holds, remove the directory unless a group it speaks for remains
        (``left``), then let the lock go. Idempotent."""
        if self._lock_fd is None:
            return
        while self.holds:
            self.holds.popitem()[1].close()
        if not self.left():
            remove(self.path, jobs=self.holds_jobs)
        os.close(self._lock_fd)
        self._lock_fd = None

    def left(self) -> list[str]:
        """The groups it speaks for that are still there: its holders' (``remaining``: a run's
        container, a lodged host's pool) and its job slots' that outlived their jobs."""
        return self.remaining() + [path for path in self._left if os.path.lexists(path)]


class JobSlot(RunDir):
    """A batch job's share of its batch's directory: the batch's token and lock speak for it,
    and its files are named ``<stem>.<what>``; ``close`` removes only those (the socket is its
    server's, the record and tombstone its registration's)."""

    def __init__(self, home: RunDir, seq: int) -> None:  # nothing is made here: the slot is names
        self.home = home
        self.path = home.path
        self.stem = f"j{seq:08x}"
        self.token = home.token + JOB_SEPARATOR + f"{seq:08x}"
        self._lock_fd = None
        self._made: list[str] = []  # what ``close`` removes: most jobs record nothing
        self._holders: list[Remaining] = []

    def _name(self, name: str) -> str:
        return f"{self.stem}.{name}"

    def _recorded(self, name: str) -> None:
        self._made.append(name)

    @property
    def socket_path(self) -> str:
        return os.path.join(self.path, self.stem + ".sock")

    def close(self) -> None:
        """Remove what this job recorded (idempotent): the batch's directory and lock stay. A
        group of the job's that its release could not remove is handed to the batch's
        directory, which then stays for a sweep, and its record (``j<seq>.groups``) with it."""
        made, self._made = self._made, []
        left = self.remaining()
        if left:
            self.home._left += left
            made = [name for name in made if name != self._name(GROUPS_NAME)]
        for name in made:
            try:
                os.unlink(os.path.join(self.path, name))
            except OSError:
                pass


def _private_owner(found: os.stat_result) -> int | None:
    """The owner of a real (not symlinked) directory no one else may enter, else None."""
    if not stat.S_ISDIR(found.st_mode) or found.st_mode & 0o077:
        return None
    return found.st_uid


def remove(path: str, *, jobs: bool = True) -> bool:
    """Whether the run directory is gone after this. Unlink the sockets (only sockets), the
    records and the lock inside a real (not symlinked) directory, then the directory; best effort.
    ``jobs``: job slots' files may be there (a reaper cannot know; a run knows it has none)."""
    try:
        dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        slots: list[str] = []
        sweep_mark = (SWEEPING_NAME, DEAD_NAME) if jobs else ()  # a sweep's marks (a run has none)
        if jobs:
            try:
                slots = [name for name in os.listdir(dir_fd) if name.startswith("j") and name.endswith(JOB_SUFFIXES)]
            except OSError:
                pass
        for name in (SOCKET_NAME, PGROUP_NAME, GROUPS_NAME, *slots, *sweep_mark, LOCK_NAME):
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
                if not name.endswith(".sock") or stat.S_ISSOCK(mode):
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
