"""The two ``prctl`` options containment needs, resolved once, before any fork.

Through the native module where it was built; ctypes, whose import the run path would pay at
start-up, only as fallback.
"""

from __future__ import annotations

import os

from .. import native

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


_resolved = None
_subreaper = False  # whether ``set_child_subreaper`` made this process one (for good)
_hidden = False  # whether ``set_not_dumpable`` ran here (a fork keeps the flag: so does the cache)


def _forked() -> None:
    """A forked child is no subreaper (the kernel does not pass the flag on): forget the cache."""
    global _subreaper
    _subreaper = False


os.register_at_fork(after_in_child=_forked)


def _prctl():
    global _resolved
    if _resolved is None:
        built = native.module()
        if built is not None:
            _resolved = built.lib.prctl
        else:
            import ctypes

            _resolved = ctypes.CDLL(None, use_errno=True).prctl
    return _resolved


def load() -> None:
    """Resolve ``prctl`` now, so a forked child only calls it (no imports after fork)."""
    _prctl()


def set_parent_death_signal(signum: int) -> bool:
    return _prctl()(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0


def set_not_dumpable() -> bool:
    """Once per process: this process no longer dumpable, its /proc entry's descriptors, memory
    and environment, and ptrace, refused to every other process of its user that is not
    privileged (a child's exec makes the child dumpable again; its ``stat`` and ``status`` stay
    readable). Every runner's that is a process of its own (``containment.create``): its child
    read the secrets ``--env-clear`` or ``--env-remove`` kept from it in
    ``/proc/$PPID/environ``, and could attach to it. The runner service's too: every call's
    captures, input and held stream are memfds there, which another call's child could open
    through /proc/<pid>/fd."""
    global _hidden
    if not _hidden:
        _hidden = _prctl()(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    return _hidden


def set_child_subreaper() -> bool:
    """Once per process: every run's after the first costs nothing."""
    global _subreaper
    if not _subreaper:
        _subreaper = _prctl()(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _subreaper


def made_subreaper() -> bool:
    """Whether a run (of either mechanism, in a process the runner owns) made this process a
    subreaper: only then does what a run left outside its boundary (a process-group run's
    ``setsid`` daemon, a cgroup v2 run's process that wrote itself into another group's
    ``cgroup.procs``) come to it once orphaned, so only then is there anything of theirs to look
    for (``containment/escaped.end_escapees``)."""
    return _subreaper


def parent_gone(expected: int, witness: int | None, hung_up: bool = False) -> bool:
    """Asked once the death signal is armed: whether the parent that started this process (pid
    ``expected``) has ended. ``getppid()`` names a parent in this pid namespace; one outside it
    (``unshare --pid`` without ``--fork``) reads as 0, alive or dead, for an orphan is handed to
    a reaper outside too. There ``witness`` says: a pidfd of the parent (readable once it has
    ended) or, with ``hung_up``, a socket whose other end only the parent holds; None: taken
    as alive."""
    parent = os.getppid()
    if parent == expected:
        return False
    if parent != 0 or witness is None:
        return parent != 0
    import select

    poller = select.poll()
    poller.register(witness, select.POLLRDHUP if hung_up else select.POLLIN)
    gone = select.POLLHUP | select.POLLRDHUP | select.POLLERR if hung_up else select.POLLIN
    return any(events & gone for _, events in poller.poll(0))
