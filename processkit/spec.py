"""The run specification: everything the engine needs, validated and frozen by the CLI.

Plain classes, not ``enum`` or ``typing.NamedTuple``: this module is on every run's start-up
path, and importing ``enum`` and ``typing`` (with the ``re`` they pull in) costs more than a
short run's own work. The values are frozen by convention: nothing assigns to them after the
CLI builds them.
"""

from __future__ import annotations

import os
import time

from .envvars import whole_number
from .plain import Constant, Plain

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, ClassVar


class StdinMode(Constant):
    __slots__ = ()
    NULL: ClassVar[StdinMode]
    INHERIT: ClassVar[StdinMode]
    FILE: ClassVar[StdinMode]


StdinMode.NULL = StdinMode("NULL", "null")
StdinMode.INHERIT = StdinMode("INHERIT", "inherit")
StdinMode.FILE = StdinMode("FILE", "file")


class OverflowPolicy(Constant):
    __slots__ = ()
    TRUNCATE: ClassVar[OverflowPolicy]
    CANCEL: ClassVar[OverflowPolicy]


OverflowPolicy.TRUNCATE = OverflowPolicy("TRUNCATE", "truncate")
OverflowPolicy.CANCEL = OverflowPolicy("CANCEL", "cancel")

DEFAULT_CAPTURE_MAX_BYTES = 8 * 1024 * 1024
# Which part of a stream its capture file keeps (--capture-keep): the reference's first bytes,
# the last bytes, or the first half of the cap and the last half.
KEEP_MODES = ("head", "tail", "head-tail")

# A run whose stream no client can follow (a bench's run without --jsonl-dir, a --keep failed
# job) is published once its child has run this long: one that ends sooner makes no record,
# socket or tombstone (about a quarter of a short run's cost), one that lasts is seen as any.
# ``PROCESSKIT_LATE_PUBLICATION_MS`` (whole milliseconds, read once at import) moves it: a test on
# a loaded machine cannot count on a child ending within 50 ms, so it sets the wait long.
LATE_PUBLICATION_MS = whole_number("PROCESSKIT_LATE_PUBLICATION_MS", 50)
# The reference's unsigned field widths: what its CLI values and its replies' numbers fit in.
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
# Every containment mechanism a report or reply may name: the two made here (``cgroup_v2``,
# ``process_group``), the reference's on other platforms, and ``unknown``. Here rather than in
# ``containment`` so a control client can check a reply without importing the containment layer.
MECHANISMS = ("job_object", "cgroup_v2", "process_group", "process_reaper", "unknown")


class EnvPlan(Plain):
    """How the child's environment is derived from the runner's, applied in this fixed order."""

    __slots__ = ("clear", "remove", "files", "assignments", "run_id_key")

    def __init__(
        self,
        *,
        clear: bool = False,
        remove: tuple[str, ...] = (),
        files: tuple[str, ...] = (),
        assignments: tuple[tuple[str, str], ...] = (),
        run_id_key: str | None = None,
    ):
        self.clear = clear
        self.remove = remove
        self.files = files
        self.assignments = assignments
        self.run_id_key = run_id_key


class Limits(Plain):
    __slots__ = ("max_memory", "max_processes", "cpu_quota")

    def __init__(
        self, *, max_memory: int | None = None, max_processes: int | None = None, cpu_quota: float | None = None
    ):
        self.max_memory = max_memory
        self.max_processes = max_processes
        self.cpu_quota = cpu_quota

    @property
    def requested(self) -> bool:
        """Whether any cap is asked for (asked three times a run: no generator for it)."""
        return self.max_memory is not None or self.max_processes is not None or self.cpu_quota is not None


NO_ENV_CHANGES = EnvPlan()
NO_LIMITS = Limits()


class RunSpec(Plain):
    __slots__ = (
        "argv",
        "jsonl",
        "run_id",
        "run_id_given",
        "labels",
        "cwd",
        "timeout_ms",
        "idle_timeout_ms",
        "grace_ms",
        "snapshot_interval_ms",
        "env",
        "limits",
        "capture_dir",
        "capture_max_bytes",
        "capture_overflow",
        "capture_keep",
        "stdin",
        "stdin_file",
        "inherit_stdio",
        "pty",
        "pty_size",
        "echo",
        "argv_raw",
        "detach",
        "usage_file",
        "stderr_to_stdout",
    )

    def __init__(
        self,
        *,
        argv: tuple[str, ...],
        jsonl: str,
        run_id: str,
        run_id_given: bool,
        labels: tuple[tuple[str, str], ...] = (),
        cwd: str | None = None,
        timeout_ms: int | None = None,
        idle_timeout_ms: int | None = None,
        grace_ms: int | None = None,
        snapshot_interval_ms: int | None = None,
        env: EnvPlan = NO_ENV_CHANGES,
        limits: Limits = NO_LIMITS,
        capture_dir: str | None = None,
        capture_max_bytes: int = DEFAULT_CAPTURE_MAX_BYTES,
        capture_overflow: OverflowPolicy = OverflowPolicy.TRUNCATE,
        capture_keep: str = "head",  # one of KEEP_MODES
        stdin: StdinMode = StdinMode.NULL,
        stdin_file: str | None = None,
        inherit_stdio: bool = False,
        pty: bool = False,
        pty_size: tuple[int, int] | None = None,  # (columns, rows) given by --pty-size, else None
        echo: bool = True,
        argv_raw: bool = False,
        detach: bool = False,  # the CLI hands the run to a copy of itself; the engine never sees it
        usage_file: str | None = None,  # extension: where the CLI writes the run's whole Usage as JSON
        # ``stderr=STDOUT``: the child's stderr is its stdout (the same pipe, read and captured as
        # stdout, in the order the child wrote; or the same descriptor).
        stderr_to_stdout: bool = False,
    ):
        self.argv = argv
        self.jsonl = jsonl
        self.run_id = run_id
        self.run_id_given = run_id_given
        self.labels = labels
        self.cwd = cwd
        self.timeout_ms = timeout_ms
        self.idle_timeout_ms = idle_timeout_ms
        self.grace_ms = grace_ms
        self.snapshot_interval_ms = snapshot_interval_ms
        self.env = env
        self.limits = limits
        self.capture_dir = capture_dir
        self.capture_max_bytes = capture_max_bytes
        self.capture_overflow = capture_overflow
        self.capture_keep = capture_keep
        self.stdin = stdin
        self.stdin_file = stdin_file
        self.inherit_stdio = inherit_stdio
        self.pty = pty
        self.pty_size = pty_size
        self.echo = echo
        self.argv_raw = argv_raw
        self.detach = detach
        self.usage_file = usage_file
        self.stderr_to_stdout = stderr_to_stdout


class RunContext(Plain):
    """What a run takes from whoever carries it rather than from its description: captured
    when the call is made, or wired in by the carrier (the CLI's ``run``, a batch, ``bench``, the
    API's runner service), and handed to the engine beside the ``RunSpec``, which holds only what
    describes the run (a carrier never sets its wiring there). Never read from the process-wide state of the process
    that carries the run (``os.environ``, fds 0-2, the umask), which a long-lived carrier (the API's runner
    service) shares between the runs of many calls. Descriptors here are the carrier's to close,
    except ``held_fds`` (unless ``held_lent``) and ``ready_fd``, which the engine closes as it
    would its own files.

    - ``env``: the environment the child's is derived from (``EnvPlan`` applied to it); None:
      this process's own ``os.environ`` (``run``, ``batch``, ``bench``).
    - ``umask``: the caller's, which the child and the files at the paths the spec names take
      (``engine.callers_umask``); None: this process's own.
    - ``stdio``: the descriptors standing for the caller's stdin, stdout and stderr, in that
      order, each an open fd of this process; None: this process's own 0, 1 and 2. They are
      what a child inherits (``inherit_stdio``, ``StdinMode.INHERIT``, the fds a spawn does not
      pipe), where the echo writes, and the terminal a ``--pty`` run's keys, size and
      foreground come from.
    - ``ready_fd``: a detached copy's pipe to its launcher (``cli/detach.py``), told once the
      child started and closed then; None for every other run.
    - ``held_fds``: a batch's ``--keep failed``: (stream, stdout, stderr) memfds the engine
      writes and closes instead of opening the spec's ``jsonl`` and ``capture_dir`` files
      (which it still names); head capture only. ``(stream,)`` alone holds the stream only (the
      API's runner service for a run with no capture, or one captured into files).
    - ``held_lent``: the ``held_fds`` stay the carrier's: the engine writes them and never closes
      them (a batch's memfds serve its next attempt as they are, not through copies the engine
      closes: six system calls a job). The carrier takes them back only once the run's steps
      are over, when nothing of the run writes them any more.
    - ``cwd``: the carrier's working directory as it read it once for every run it carries (a
      batch or a bench session, at its start: ``carrier_cwd``); None: the engine reads this
      process's at each run.
    - ``publish_after_ms``: None: the record and socket are made before the spawn (the
      reference's order); else only once the child has run this long (a bench's run, a
      ``--keep failed`` job: streams no client can read, and runs most of which end sooner, so
      they pay for no publication).
    - ``output_fd``: the child's stdout in place of a pipe, its stderr /dev/null (``bench
      --output``).
    - ``child_fds``: the API's subprocess-shaped streams (``stdin=PIPE``, ``stdout=`` a file, a
      descriptor or a pipe the caller reads): per standard stream, a descriptor the child gets
      as it is, in place of the runner's pipe or /dev/null (None: the stream as the spec says);
      the child's copies are the spawn's.
    - ``linger_ms``: not 0: once the native spawn's child has exec'd, how long the spawn waits
      at most for its exit before the run goes on (``bench``'s runs: a command shorter than this
      has the CPU to itself, as a child of hyperfine's blocking ``wait4`` does). A run's, as
      every other part of its context: no process-wide setting another run could see.
    - ``captured``: a list of the carrier's that the engine fills, once it opened the run's
      capture files (``capture_dir``), with a descriptor to read each (stdout's, then
      stderr's; ``readback.NO_FILE`` for one that is no regular file or got no descriptor,
      ``readback.UNREADABLE`` for a file of the caller's this user may not read), on the same
      file as the engine's own, so the carrier reads back the bytes the run captured even
      after the child put another file at the path (the API's runner service). The carrier
      closes them. Files made for it are opened read-write, so a mode the caller's umask left
      unreadable refuses no read-back.
    - ``streamed``: the same for the run's named stream file (``jsonl``): one descriptor.
    - ``places``: where the carrier put what the spec names by a stand-in (the API's runner
      service: ``api.wire``'s ``SCRATCH_*`` for a ``jsonl``, ``capture_dir`` or ``stdin_file``
      in its memory or scratch directory), stand-in to path; ``place`` reads a spec's path
      through it.
    - ``passed_fds``: the caller's descriptors from 3 up the child keeps as they are (the CLI's:
      ``caller_fds``, a make's jobserver pipe among them), ascending; (): none, every fd but the
      child's 0-2 closed in it (the API's runner service, whose own and other calls'
      descriptors no child may hold).
    - ``escapees``: the carrier's look, once a cgroup v2 run's group is killed, for the run's
      processes that left the group (a write of its pid into another group's ``cgroup.procs``)
      and so outlived the kill: it ends and says them, and returns their pids, which
      ``cleanup_finished`` lists as remaining. Only a carrier that can tell them from anyone
      else's gives one (the CLI's ``run``, the one run of its process, a subreaper); None: not
      looked for here.
    """

    __slots__ = (
        "env",
        "stdio",
        "ready_fd",
        "held_fds",
        "held_lent",
        "publish_after_ms",
        "output_fd",
        "child_fds",
        "places",
        "linger_ms",
        "cwd",
        "captured",
        "streamed",
        "passed_fds",
        "escapees",
        "umask",
    )

    def __init__(
        self,
        *,
        env: dict[str, str] | None = None,
        stdio: tuple[int, int, int] | None = None,
        ready_fd: int | None = None,
        held_fds: tuple[int, ...] | None = None,
        held_lent: bool = False,
        publish_after_ms: int | None = None,
        output_fd: int | None = None,
        child_fds: tuple[int | None, int | None, int | None] | None = None,
        places: dict[str, str] | None = None,
        linger_ms: int = 0,
        cwd: str | None = None,
        captured: list[int] | None = None,
        streamed: list[int] | None = None,
        passed_fds: tuple[int, ...] = (),
        escapees: Callable[[], list[int]] | None = None,
        umask: int | None = None,
    ):
        self.env = env
        self.stdio = stdio
        self.ready_fd = ready_fd
        self.held_fds = held_fds
        self.held_lent = held_lent
        self.publish_after_ms = publish_after_ms
        self.output_fd = output_fd
        self.child_fds = child_fds
        self.places = places
        self.linger_ms = linger_ms
        self.cwd = cwd
        self.captured = captured
        self.streamed = streamed
        self.passed_fds = passed_fds
        self.escapees = escapees
        self.umask = umask

    def fd(self, index: int) -> int:
        """The descriptor standing for the caller's ``index`` (0, 1 or 2)."""
        return index if self.stdio is None else self.stdio[index]

    def place(self, path: str) -> str:
        """``path`` (a spec's ``jsonl``, ``capture_dir`` or ``stdin_file``) where this run has
        it: the carrier's own place for a stand-in, else ``path`` itself."""
        return path if self.places is None else self.places.get(path, path)


OWN_CONTEXT = RunContext()  # a run carried in the process that asked for it


def carrier_cwd() -> str | None:
    """A carrier's working directory, read once for all the runs it carries (``RunContext.cwd``:
    not a ``getcwd`` a run; a batch's or bench's process never changes it meanwhile); None when
    it cannot be read (removed under it): each run then reads it itself and fails its set-up
    saying so, as without this."""
    try:
        return os.getcwd()
    except OSError:
        return None


def callers_cwd() -> str:
    """The calling process's working directory as the API sends it to its runner service (a
    ``run``'s, a ``batch``'s, a ``bench``'s): its path, or when it was removed under the caller,
    this process's /proc entry for it, which the kernel still resolves to that directory while
    the caller lives (it waits on the call), so the child starts in it as a ``subprocess``
    child would, and a relative path the call names fails there, never taken from ``/``."""
    try:
        return os.getcwd()
    except OSError:
        return f"/proc/{own_pid()}/cwd"


def shown_cwd(path: str) -> str | None:
    """The child's working directory as ``run_started`` names it (``cwd``: "the child's absolute
    working directory; null if it could not be resolved"): ``path`` itself, except for a
    ``/proc/<pid>/cwd`` stand-in (``callers_cwd``'s, or one a caller named), which is no
    directory of the run's: the directory it resolves to, or None when that was removed (the
    kernel's link then reads ``... (deleted)``, which names no directory) or cannot be read."""
    if not path.startswith("/proc/"):
        return path
    parts = path.split("/", 4) + ["", ""]  # "", "proc", pid, "cwd", the rest
    pid, entry, rest = parts[2], parts[3], parts[4]
    if not pid.isdigit() or entry != "cwd":
        return path
    link = f"/proc/{pid}/cwd"
    try:
        target = os.readlink(link)
        same = os.stat(link)
        there = os.stat(target)
    except OSError:
        return None
    if not target.startswith("/") or (same.st_dev, same.st_ino) != (there.st_dev, there.st_ino):
        return None
    return os.path.normpath(os.path.join(target, rest))


def new_run_id() -> str:
    """The id of a run not given one: ``run-<pid>-<nanos>`` (docs/run.md)."""
    return f"run-{own_pid()}-{time.time_ns()}"


def own_pid() -> int:
    """This process's pid, read once a process (``getpid`` is a system call each time: the C
    library keeps none; a batch names each of its jobs by it, the API's service puts it in each
    reply and memfd name), again in a forked child."""
    if not _PID:
        _PID.append(os.getpid())
    return _PID[0]


_PID: list[int] = []  # this process's pid once ``own_pid`` has read it; emptied in a forked child
os.register_at_fork(after_in_child=_PID.clear)
