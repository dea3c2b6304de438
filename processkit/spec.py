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
    from typing import ClassVar


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
        "cwd_implicit",
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
        # ``cwd`` is the API caller's own (``callers_cwd``), named by no one: not walked (``engine.launch``).
        cwd_implicit: bool = False,
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
        self.cwd_implicit = cwd_implicit


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
