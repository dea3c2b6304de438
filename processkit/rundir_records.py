"""What a run's directory records for a reaper (``processkit.rundir``): the process group's
identity (``pgroup``), where its cgroup v1 groups are (``groups``), a batch job slot's of each
(``j<seq>.pgroup``, ``j<seq>.groups``); and how they are read back, bounded: only ever a dead
runner's, by a reaper (``containment.sweep``), never on a run's way.
"""

from __future__ import annotations

import os

from .rundir import GROUPS_NAME, PGROUP_NAME

GROUPS_LIMIT = 16 * 1024


def job_files(path: str, suffix: str) -> list[str]:
    """The names of the job slots' ``suffix`` files in the run directory ``path``, in slot order."""
    try:
        names = os.listdir(path)
    except OSError:
        return []
    return sorted(name for name in names if name.startswith("j") and name.endswith(suffix))


def read_process_group(path: str, name: str = PGROUP_NAME) -> tuple[int, str, int] | None:
    """``(pgid, leader start time, session)`` as recorded, or None when absent or malformed."""
    from .bounded import RUN_FILE, read_start  # read only of a dead runner's directory: not on a run's path

    try:
        fields = read_start(os.path.join(path, name), 128, RUN_FILE).split()  # never a FIFO's wait
    except (OSError, ValueError):  # ValueError: bounded.InputError
        return None
    if len(fields) != 3 or not all(field.isdigit() for field in fields):
        return None
    return int(fields[0]), fields[1].decode(), int(fields[2])


def read_groups(path: str, name: str = GROUPS_NAME) -> list[str]:
    """The recorded group paths (bounded, unchecked: the reaper decides what it may touch)."""
    from .bounded import RUN_FILE, read_start

    try:
        text = read_start(os.path.join(path, name), GROUPS_LIMIT, RUN_FILE).decode("utf-8", "surrogateescape")
    except (OSError, ValueError):
        return []
    return [line for line in text.split("\n") if line]
