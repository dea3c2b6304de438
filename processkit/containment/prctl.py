"""The two ``prctl`` options containment needs, through libc (loaded once, before any fork)."""

from __future__ import annotations

import functools

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


@functools.lru_cache(maxsize=None)
def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def load() -> None:
    """Resolve libc now, so the forked child only calls into it (no imports after fork)."""
    _libc()


def set_parent_death_signal(signum: int) -> bool:
    return _libc().prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0


def set_child_subreaper() -> bool:
    return _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
