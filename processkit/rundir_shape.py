"""Which paths are run directories, as a reaper or a client sees them: every one in the bases
(``listing``), and a path or a control endpoint taken only when it has exactly the shape a runner
makes (``shaped``, ``reapable_dir``), so nothing another user planted elsewhere is ever removed
on a record's word (docs/control-plane.md §2.6). The runner's own side is ``rundir``."""

from __future__ import annotations

import os

from .rundir import DIR_PREFIX, HEX_DIGITS, SOCKET_NAME, bases, is_token

_LEGACY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")


def listing() -> list[str]:
    """Every directory in each of ``bases()`` with a run directory's name."""
    found = []
    for directory in bases():
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        found += [
            os.path.join(directory, name)
            for name in names
            if name.startswith(DIR_PREFIX) and is_token(name[len(DIR_PREFIX) :])
        ]
    return found


def shaped(path: str) -> bool:
    """Whether ``path`` names a run directory exactly as a runner makes one, in one of ``bases()``."""
    parent, name = os.path.split(path)
    return (
        os.path.isabs(path)
        and os.path.normpath(path) == path
        and parent in bases()
        and name.startswith(DIR_PREFIX)
        and is_token(name[len(DIR_PREFIX) :])
    )


def reapable_dir(endpoint: str | None) -> str | None:
    """The run directory ``endpoint`` names, if it has exactly the shape a runner creates:
    ``<base>/pkc-<token>/c.sock`` (a batch job's: ``j<seq>.sock``) taken as written
    (docs/control-plane.md §2.6)."""
    if not endpoint:
        return None
    directory, name = os.path.split(endpoint)
    parent, dirname = os.path.split(directory)
    if (
        not os.path.isabs(endpoint)
        or not (name == SOCKET_NAME or _is_job_socket(name))
        or parent not in bases()
        or not dirname.startswith(DIR_PREFIX)
        or len(dirname) == len(DIR_PREFIX)
        or not _LEGACY_CHARS.issuperset(dirname[len(DIR_PREFIX) :])
        or endpoint != f"{parent}/{dirname}/{name}"
    ):
        return None
    return directory


def _is_job_socket(name: str) -> bool:
    seq = name[1:-5]
    return name.startswith("j") and name.endswith(".sock") and len(seq) == 8 and HEX_DIGITS.issuperset(seq)
