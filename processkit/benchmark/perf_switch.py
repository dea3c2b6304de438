"""The kernel's per-task perf switch, turned on by a helper process while ``bench`` starts up.

A session's first per-task perf event (the exit clock's, a counter or a counter's keeper) finds
the kernel's switch for per-task events off whenever no other process on the host holds one,
and turning it on waits out an RCU grace period in ``perf_event_open``: 7 to 37 ms of wall time
on this project's 2-CPU machines (bench/README.md, "bench's cycle"), spent once per session,
before the first run and after the whole start-up. A switch turned on stays on for a second
after its last event is closed (the kernel's delayed turning off), so ``turn_on``, at the start
of ``bench``'s process (the launcher's finder calls it before it runs ``bench``'s modules, ~10 ms
earlier than ``cli/bench.py`` would: a grace period of 8-17 ms was then ~9 ms of the wall; a
``bench`` started otherwise calls it there), forks a helper that opens one disabled per-task event (counting nothing,
on its own thread) and exits: it waits out the grace period while ``bench`` reads its options
and imports the engine, and ``settle`` collects it before the session's host exists (whose
reaper takes any exited child of the process) and before the session's first open. A host
where the helper cannot be forked, or perf is refused, goes on as before.

Not threads: the runner has one thread and one loop; the helper is a process of its own, in
``bench``'s process group, that has exited before the first run starts.
"""

from __future__ import annotations

import os

_HELPER: list[int] = []  # the helper's pid until ``settle`` collects it


def turn_on() -> None:
    """Fork the helper (once; not where the caller already has it). The system call is made
    ready first (``counters.prepare``: ``ctypes``, which the session needs anyway), so the
    helper only calls it: ~1 ms of CPU on the other CPU, against ~5.5 ms importing it itself."""
    from .counters import DISABLED, PERF_TYPE_SOFTWARE, attr, perf_event_open, prepare

    if _HELPER or not prepare():
        return
    try:
        pid = os.fork()
    except OSError:
        return
    if pid == 0:  # the helper: one disabled task clock, closed by its exit
        code = 1
        try:
            code = 0 if perf_event_open(attr(PERF_TYPE_SOFTWARE, 1, DISABLED)) >= 0 else 1
        finally:
            os._exit(code)
    _HELPER.append(pid)


def settle() -> bool | None:
    """The helper collected, waiting for it if it is still in its grace period: whether it
    turned the switch on (None: there was none)."""
    if not _HELPER:
        return None
    try:
        _, status = os.waitpid(_HELPER.pop(), 0)
    except ChildProcessError:  # collected by someone else: what it did is unknown
        return None
    return os.waitstatus_to_exitcode(status) == 0
