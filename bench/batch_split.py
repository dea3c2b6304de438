"""A batch job's CPU split by layer: ``bench/batch_cpu.py`` run under cProfile on the process's
CPU clock, each function's own time put in the layer its file belongs to (a built-in or a
standard-library function's time in its callers' layers, in proportion to what each caller
spent there), then each layer's share of the profiled whole and that share of an unprofiled
run's CPU per job (cProfile weighs every call, so the shares, not its times, are what carries).

- batch: ``processkit/batching/`` (the schedule, the recorder, the manifest's passes, the job's
  wiring, the held memfds), ``cli/batch*.py`` (the terminal's lines and bar), ``summary_line.py``;
- engine: the rest of ``processkit`` that a run goes through (``engine/``, ``containment/``,
  ``events/``, the loop, ``spec``, ``plain``, ...);
- the rest: outside ``processkit`` (the script itself).

Three runs in one process: the first makes the imports, the second (unprofiled) gives the CPU
per job the shares divide, the third is profiled.

    PYTHONPATH=TREE python3 bench/batch_split.py 1000 --keep failed 2>/dev/null
"""

from __future__ import annotations

import cProfile
import collections
import os
import pstats
import resource
import runpy
import sys
import time

BATCH = ("processkit/batching/", "processkit/cli/batch", "processkit/summary_line.py")
HERE = os.path.dirname(os.path.abspath(__file__))


def layer(filename: str) -> str:
    if any(part in filename for part in BATCH):
        return "batch"
    if "processkit/" in filename and "/bench/" not in filename:
        return "engine"
    return "the rest"


def foreign(filename: str) -> bool:
    """A built-in, a frozen module's or the standard library's (site-packages included)."""
    return filename == "~" or filename.startswith("<") or "/lib/python3" in filename


def own_times(stats: pstats.Stats) -> collections.Counter:
    """Each function's own time by layer; a foreign function's (``foreign``) handed up to its
    callers in proportion to what each spent in it, through foreign callers, to the first
    ``processkit`` or script frame (at most ``DEPTH`` calls up)."""
    table = stats.stats  # type: ignore[attr-defined]
    spent: collections.Counter = collections.Counter()

    def hand_up(function, seconds: float, depth: int) -> None:
        if not foreign(function[0]) or depth == DEPTH:
            spent[layer(function[0])] += seconds
            return
        callers = table.get(function, (0, 0, 0, 0, {}))[4]
        total = sum(entry[2] for entry in callers.values())
        if not callers:
            spent[layer(function[0])] += seconds
            return
        for caller, entry in callers.items():
            share = entry[2] / total if total else 1 / len(callers)
            hand_up(caller, seconds * share, depth + 1)

    for function, (_, _, own, _, _) in table.items():
        hand_up(function, own, 0)
    return spent


DEPTH = 8


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    script = os.path.join(HERE, "batch_cpu.py")
    sys.argv = ["batch_cpu.py", *sys.argv[1:]]
    runpy.run_path(script, run_name="__main__")  # the imports made, as for the two below
    before = resource.getrusage(resource.RUSAGE_SELF)
    runpy.run_path(script, run_name="__main__")  # unprofiled: the CPU the shares divide
    after = resource.getrusage(resource.RUSAGE_SELF)
    whole = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / count
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        profile.disable()
    spent = own_times(pstats.Stats(profile))
    total = sum(spent.values())
    print(f"unprofiled CPU per job (its imports made by a first run): {whole * 1e6:.0f} µs")
    for name, seconds in spent.most_common():
        print(f"{name:24s} {seconds / total:6.1%}  ~{seconds / total * whole * 1e6:5.0f} µs/job")


if __name__ == "__main__":
    main()
