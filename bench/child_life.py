"""What `bench`'s inherited perf events add to each child's own life, whoever spawns it.

Every command `bench` runs inherits the events it opens on its own thread before the clone:
the run's counters (`benchmark/counters.py`: task clock, page faults, context switches, plus
the hardware ones a host has) and the exit clock's ring events (`benchmark/exit_clock.py`, one
per CPU bench may run on). The kernel copies each into the child at its fork, enables the
counters at its exec and folds them back at its exit: work in the child's own life, which a
hyperfine child does not carry. This spawns `/usr/bin/true` from this interpreter
(`posix_spawn`, then `wait4`), blocks of `--runs` with none of the events open, with the
counters open, and with the counters and the exit clock's rings open, the three in turn for
`--rounds` rounds; it reports each block's median spawn-to-reap wall and child's CPU (user and
system, `wait4`'s: steadier than the wall on a busy host), and in parentheses the medians over
rounds of each block's difference from the plain block of its round. Run it with an install's
own python (it imports that processkit's `counters` and `exit_clock`).

    X/bin/python bench/child_life.py --rounds 41 --runs 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from processkit.benchmark.counters import Opener
from processkit.benchmark.exit_clock import ExitClock

TRUE = "/usr/bin/true"


def block(runs: int) -> tuple[float, float]:
    """The median µs from a spawn of `true` to its reap, and of the child's CPU (user and
    system, ``wait4``'s), over ``runs`` spawns."""
    walls, cpus = [], []
    for _ in range(runs):
        started = time.perf_counter_ns()
        pid = os.posix_spawn(TRUE, ["true"], {})
        usage = os.wait4(pid, 0)[2]
        walls.append(time.perf_counter_ns() - started)
        cpus.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(walls) / 1e3, statistics.median(cpus) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    opener, clock = Opener(), ExitClock()
    sides: dict[str, list[tuple[float, float]]] = {"none": [], "counters": [], "counters + exit clock": []}
    for _ in range(args.rounds):
        sides["none"].append(block(args.runs))
        fds = opener.open()
        sides["counters"].append(block(args.runs))
        opener.close(fds)
        fds, rings = opener.open(), clock.open()
        sides["counters + exit clock"].append(block(args.runs))
        opener.close(fds)
        clock.read(rings)
    opener.release()
    clock.close()
    print(f"load average at the end {os.getloadavg()[0]:.1f}; {args.rounds} rounds of {args.runs} spawns a block")
    print(f"counters this host lacks: {', '.join(opener.missing) or 'none'}; exit clock: {clock.unavailable or 'on'}")
    for name, blocks in sides.items():
        row = f"  {name:<22}"
        for column, what in ((0, "wall"), (1, "child's CPU")):
            values = [figures[column] for figures in blocks]
            added = [value - plain[column] for value, plain in zip(values, sides["none"])]
            row += f"  {what} {statistics.median(values):7.1f} us ({statistics.median(added):+6.1f})"
        print(row)


if __name__ == "__main__":
    main()
