"""What a batch job's CPU would be with parts of its work taken out: ``bench/batch_cpu.py``'s
batch run in this process with the parts named in PARTS left undone. An upper bound of what
cutting each part could buy (a part left undone costs nothing; a faster one still costs
something), never a way to run a batch: the records it leaves are not whole.

- ``snapshot``: the members snapshot at the spawn (its reads of the group and of /proc, its event);
- ``events``: a held stream's gathering of the events it would make records of only if kept;
- ``progress``: the human line on stderr for each job;
- ``execwait``: the exec's report waited for inside the native spawn (as the CLI's lone run
  waits for it), not on the batch's loop: no loop turn, reader or timer for it, which bounds
  what folding that wait into the spawn could buy (the other job waits meanwhile).

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


PARTS = {"snapshot": _no_snapshot, "events": _no_events, "progress": _no_progress, "execwait": _exec_in_spawn}


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
