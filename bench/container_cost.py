"""A lodged host's container for a run without a cap (every API call's, most batch jobs'), built
warm in a loop (issue 49, api59): ``containment.create``'s wall per run, the four takes' share
(``Pool.take``, the lent groups' looks, which stay at the take) and the rest (the containers'
own construction). Each run's groups are given back and started again between two creates, as
the API's runner service does after its reply. Run it with each tree's interpreter, alternating.

    python3 bench/container_cost.py -n 600
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from processkit import containment, fdlimit, rundir
from processkit.containment import pool
from processkit.spec import NO_LIMITS


def measure(n: int, warm: int) -> list[tuple[int, int]]:
    """``(create's ns, its takes' ns)`` for each run after ``warm``."""
    taken = [0]
    plain = pool.Pool.take

    def take(self, parent, controllers):
        started = time.perf_counter_ns()
        try:
            return plain(self, parent, controllers)
        finally:
            taken[0] += time.perf_counter_ns() - started

    pool.Pool.take = take  # type: ignore[method-assign]
    fdlimit.leave_room_for_idle_groups(fdlimit.soft_limit())  # as the service: idle groups keep their files
    home = rundir.RunDir()
    home.holds_jobs = True
    spans = []
    try:
        for seq in range(warm + n):
            slot = rundir.JobSlot(home, seq)
            taken[0] = 0
            started = time.perf_counter_ns()
            container = containment.create(NO_LIMITS, slot)
            spans.append((time.perf_counter_ns() - started, taken[0]))
            container.release()
            slot.close()
            containment.restart_idle(home)
    finally:
        pool.Pool.take = plain  # type: ignore[method-assign]
        lender = pool.held_by(home)
        if lender is not None:
            lender.close()
        home.close()
    return spans[warm:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=600, help="runs measured (default 600)")
    parser.add_argument("--warm", type=int, default=100, help="runs first, not measured (default 100)")
    options = parser.parse_args()
    spans = measure(options.n, options.warm)
    whole = statistics.median(create for create, _ in spans) / 1000
    takes = statistics.median(takes for _, takes in spans) / 1000
    rest = statistics.median(create - takes for create, takes in spans) / 1000
    print(
        f"{sys.prefix}: create {whole:.1f} us, of which the four takes {takes:.1f} us and the rest {rest:.1f} us (medians)"
    )


if __name__ == "__main__":
    main()
