"""The run specification: everything the engine needs, validated and frozen by the CLI."""

from __future__ import annotations

import enum
from typing import NamedTuple


class StdinMode(enum.Enum):
    NULL = "null"
    INHERIT = "inherit"
    FILE = "file"


class OverflowPolicy(enum.Enum):
    TRUNCATE = "truncate"
    CANCEL = "cancel"


DEFAULT_CAPTURE_MAX_BYTES = 8 * 1024 * 1024
# The reference's unsigned field widths: what its CLI values and its replies' numbers fit in.
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
# Every containment mechanism a report or reply may name: the two made here (``cgroup_v2``,
# ``process_group``), the reference's on other platforms, and ``unknown``. Here rather than in
# ``containment`` so a control client can check a reply without importing the containment layer.
MECHANISMS = ("job_object", "cgroup_v2", "process_group", "process_reaper", "unknown")


class EnvPlan(NamedTuple):
    """How the child's environment is derived from the runner's, applied in this fixed order."""

    clear: bool = False
    remove: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    assignments: tuple[tuple[str, str], ...] = ()
    run_id_key: str | None = None


class Limits(NamedTuple):
    max_memory: int | None = None
    max_processes: int | None = None
    cpu_quota: float | None = None

    @property
    def requested(self) -> bool:
        return any(v is not None for v in (self.max_memory, self.max_processes, self.cpu_quota))


class RunSpec(NamedTuple):
    argv: tuple[str, ...]
    jsonl: str
    run_id: str
    run_id_given: bool
    labels: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    timeout_ms: int | None = None
    idle_timeout_ms: int | None = None
    grace_ms: int | None = None
    snapshot_interval_ms: int | None = None
    env: EnvPlan = EnvPlan()
    limits: Limits = Limits()
    capture_dir: str | None = None
    capture_max_bytes: int = DEFAULT_CAPTURE_MAX_BYTES
    capture_overflow: OverflowPolicy = OverflowPolicy.TRUNCATE
    stdin: StdinMode = StdinMode.NULL
    stdin_file: str | None = None
    inherit_stdio: bool = False
    pty: bool = False
    pty_size: tuple[int, int] | None = None  # (columns, rows) given by --pty-size, else None
    echo: bool = True
    argv_raw: bool = False
    detach: bool = False  # the CLI hands the run to a copy of itself; the engine never sees it
