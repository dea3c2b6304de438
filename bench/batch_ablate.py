"""What a batch job's CPU would be with parts of its work taken out: ``bench/batch_cpu.py``'s
batch run in this process with the parts named in PARTS left undone. An upper bound of what
cutting each part could buy (a part left undone costs nothing; a faster one still costs
something), never a way to run a batch: the records it leaves are not whole.

- ``snapshot``: the members snapshot at the spawn (its reads of the group and of /proc, its event);
- ``events``: a held stream's gathering of the events it would make records of only if kept;
- ``progress``: the human line on stderr for each job;
- ``execwait``: the exec's report waited for inside the native spawn (as the CLI's lone run
  waits for it), not on the batch's loop: no loop turn, reader or timer for it, which bounds
  what folding that wait into the spawn could buy (the other job waits meanwhile);
- ``checks``: the pool's reuse checks of a lent group (``lent.parkable``, ``restarted``,
  ``empty``: the link counts, settings, members, peaks and counter restarts) taken as passed, but
  the memory group's ``tasks`` opened afresh (its child joins by it): what any merge, held fd or
  native form of those reads could buy at most;
- ``watched``: of those checks, only the reads a watch on each group's directory (inotify's
  ``IN_MODIFY`` of a file written, ``IN_CREATE`` of a group made below) could stand for left
  undone: the link counts and the settings only a write changes (``cgroup.max.*``,
  ``cgroup.type``, ``cgroup.subtree_control``, ``pids.max``, the memory limits and swappiness);
  the counters (``pids.events``, ``memory.failcnt``, ``memory.oom_control``), members, peaks,
  charges and restarts still read; the watch's own reads not added (so an upper bound);
- ``inotify``: ``watched`` made real: an inotify watch on each pooled group's directory
  (``IN_MODIFY``, ``IN_CREATE``, ``IN_MOVED_TO``), its events read (to ``EAGAIN``) once before a
  run's groups are taken, once before the groups are started again ahead and once before they
  are given back; a group any event marks (a group made below, a write to a setting, a lost
  event: ``IN_Q_OVERFLOW``) gets every check for good; the rest get ``watched``'s: a prototype
  of that design, its watch's costs in, to weigh it (ctypes: not a path for the product);
- ``drained``: a pooled memory group found still charged (its peak not 0 once restarted)
  lent all the same, as if it had drained: what the pool's charge rule costs (its groups tried
  again later, made afresh meanwhile), the bound of any way to have them drain sooner;
- ``figures``: a run's accounting reads (``Container.usage``: the v1 groups' six counters, the
  v2 group's) left undone, its figures null.

``PROCESSKIT_ACCOUNTING=0`` leaves the v1 accounting groups out as well (no group, no figure).

    python3 bench/batch_ablate.py PARTS|none [N] [BATCH OPTIONS] 2>/dev/null   # PARTS: a,b,...
    PROCESSKIT_ACCOUNTING=0 python3 bench/batch_ablate.py snapshot,events,progress 1000 --keep failed
"""

from __future__ import annotations

import os
import runpy
import sys


def _no_snapshot() -> None:
    import processkit.engine.launch as launch

    launch.emit_snapshot = lambda run, reason: None


def _no_events() -> None:
    from processkit.events.emitter import Emitter

    real = Emitter.emit

    def emit(self, event):
        name = getattr(event, "name", None)
        if self._gathered is not None and name and name not in self._remember:
            return  # gathered, to be dropped unread for a passing job
        real(self, event)

    Emitter.emit = emit


def _no_progress() -> None:
    from processkit.cli import batch_progress

    batch_progress.Progress.finished = lambda self, line, tally: None


class _Lone:
    """A host seen as carrying one run for good (``Host.alone``), all else its own."""

    alone = True

    def __init__(self, host):
        self._host = host

    def __getattr__(self, name):
        return getattr(self._host, name)


def _exec_in_spawn() -> None:
    import processkit.engine.launch as launch

    real = launch._exec_reported
    launch._exec_reported = lambda host, run, starting: real(_Lone(host), run, starting)


def _no_checks() -> None:
    import processkit.containment.pool as pool
    from processkit.containment import cgroupfs

    def joinable(group, ahead=False):
        if "memory" in group.controllers and group.join_fd < 0 and not ahead:
            group.join_fd = cgroupfs.open_members(group.path, parent_fd=group.parent_fd)
        return True

    pool.parkable = lambda group: True
    pool.restarted = joinable
    pool.empty = joinable


COUNTERS = frozenset(("pids.events", "memory.failcnt", "memory.oom_control", "cpu.stat"))


class _Linked:
    st_nlink = 2  # no group below, as a watch that saw no ``IN_CREATE`` would say


_COUNTED: dict[str, tuple[tuple[str, ...], tuple[bytes, ...]]] = {}  # a group's counters as made, by path


def _counters_as_made(group) -> bool:
    """``lent._as_made`` for the counters of ``group``'s settings alone (``COUNTERS``)."""
    if group.settings is None:
        return False
    found = _COUNTED.get(group.path)
    if found is None:
        pairs = [(n, c) for n, c in zip(group.setting_files, group.settings) if n in COUNTERS]
        found = _COUNTED[group.path] = (tuple(n for n, _ in pairs), tuple(c for _, c in pairs))
    return group.files.same(*found)


def _watched() -> None:
    from processkit.containment import lent

    lent._as_made = _counters_as_made
    lent._stat = lambda group: _Linked


def _inotify() -> None:
    import ctypes
    import struct

    import processkit.containment as containment
    import processkit.containment.pool as pool
    from processkit.containment import base, lent

    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert fd >= 0, "inotify_init1"
    mask = 0x2 | 0x100 | 0x80  # IN_MODIFY, IN_CREATE, IN_MOVED_TO
    watched: dict[int, str] = {}
    dirty: set[str] = set()
    only_written = frozenset(n.encode() for names in lent.SETTINGS.values() for n in names) - {
        c.encode() for c in COUNTERS
    }
    header = struct.Struct("iIII")

    def drain() -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            at = 0
            while at < len(chunk):
                wd, event, _, size = header.unpack_from(chunk, at)
                name = chunk[at + 16 : at + 16 + size].rstrip(b"\0")
                at += 16 + size
                if event & 0x4000:  # IN_Q_OVERFLOW: every group's checks for good
                    dirty.update(watched.values())
                elif event & 0x180 or name in only_written:
                    path = watched.get(wd)
                    if path is not None:
                        dirty.add(path)

    made = lent.Pooled.__init__

    def init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        wd = libc.inotify_add_watch(fd, os.fsencode(self.path), mask | 0x01000000)  # IN_ONLYDIR
        if wd >= 0:
            watched[wd] = self.path
        else:
            dirty.add(self.path)

    lent.Pooled.__init__ = init
    full_made, full_stat = lent._as_made, lent._stat
    lent._as_made = lambda group: full_made(group) if group.path in dirty else _counters_as_made(group)
    lent._stat = lambda group: full_stat(group) if group.path in dirty else _Linked

    def drained(real):
        def call(*args, **kwargs):
            drain()
            return real(*args, **kwargs)

        return call

    containment.create = drained(containment.create)
    pool.Pool.restart_ahead = drained(pool.Pool.restart_ahead)
    base.Container.release = drained(base.Container.release)


def _drained() -> None:
    from processkit.containment import cgroupfs, lent

    real = lent._memory_restarted

    def restarted(group, cpuacct, ahead):
        started = real(group, cpuacct, ahead)
        if started is None:  # still charged: lent as if drained
            if not ahead:
                group.join_fd = cgroupfs.open_members(group.path, parent_fd=group.parent_fd)
            return True
        return started

    lent._memory_restarted = restarted


def _no_figures() -> None:
    from processkit.containment import accounting, base

    base.Container.usage = lambda self, live=None: accounting.Usage()


PARTS = {
    "snapshot": _no_snapshot,
    "events": _no_events,
    "progress": _no_progress,
    "execwait": _exec_in_spawn,
    "checks": _no_checks,
    "watched": _watched,
    "inotify": _inotify,
    "drained": _drained,
    "figures": _no_figures,
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    chosen = [] if sys.argv[1] == "none" else sys.argv[1].split(",")
    unknown = sorted(set(chosen) - set(PARTS))
    if unknown:
        sys.exit(f"batch_ablate.py: no part {', '.join(unknown)}: the parts are {', '.join(PARTS)} (or none)")
    for part in chosen:
        PARTS[part]()
    sys.argv = ["batch_cpu.py", *sys.argv[2:]]
    runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "batch_cpu.py"), run_name="__main__")


if __name__ == "__main__":
    main()
