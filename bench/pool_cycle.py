"""The lent groups' own cost per job, without the job: a lodged host's pool driven as a `-j2`
batch drives it (a job's set of groups taken, the next set started again ahead, the set of the
job before given back), N times, with the v2, cpuacct, memory and pids groups of this host. No
process joins them, so no group is ever still charged: this is the checks and restarts alone,
each a few system calls, which a whole batch's figure (`bench/batch_cpu.py`) hides in its noise.

    PYTHONPATH=TREE python3 bench/pool_cycle.py [N]

Prints the CPU (user + system) per cycle in µs. Run each tree in turn, alternating; root, on a
host with writable cgroup v1 memory, pids and cpuacct hierarchies.
"""

from __future__ import annotations

import sys
import time


def main() -> None:
    from processkit import rundir
    from processkit.containment import cgroup_v1, cgroup_v2, pool

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home, 64 * pool.IDLE_FILES)
    kinds = [(parent, (controller,)) for controller, parent in cgroup_v1.own_groups().items()]
    kinds = [kind for kind in kinds if kind[1][0] in ("cpuacct", "memory", "pids")]
    v2_parent = cgroup_v2.find_parent()
    if v2_parent is not None:
        kinds.append((v2_parent, pool.V2))
    held: list[list] = []

    def job() -> None:
        held.append([lender.take(parent, controllers) for parent, controllers in kinds])
        lender.restart_ahead()
        if len(held) > 1:
            for group in held.pop(0):
                lender.give(group)

    try:
        spare = [[lender.take(parent, controllers) for parent, controllers in kinds] for _ in range(3)]
        for groups in spare:  # idle groups to start again ahead, as a batch's pool has
            for group in groups:
                lender.give(group)
        for _ in range(50):
            job()
        started = time.process_time()
        for _ in range(count):
            job()
        print(f"{(time.process_time() - started) / count * 1e6:.1f} µs a job ({len(kinds)} groups)")
    finally:
        for groups in held:
            for group in groups:
                lender.give(group)
        lender.close()
        home.close()


if __name__ == "__main__":
    main()
