"""What a batch job's cgroups cost its batch process, by leaving them out: ``bench/batch_cpu.py``
run with every v1 accounting hierarchy (memory, pids, cpuacct), then with each one left out in
turn (the run's figures from it then come from elsewhere or stay null), then with none
(``PROCESSKIT_ACCOUNTING=0``), the variants alternating within each round; the batch process's
user and system CPU per job (medians over the rounds), and how many groups of each kind its
pool made (the rest of the jobs were lent a group an earlier job gave back).

    python3 bench/batch_groups.py [N] [ROUNDS] 2>/dev/null

An instrument, not a setting: the hierarchies are left out by this script in the batch's own
process, as a host that does not mount them would have them.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("memory,pids,cpuacct", "pids,cpuacct", "memory,cpuacct", "memory,pids", "")

# Run in a child: the hierarchies kept, the pool's fresh groups counted, then batch_cpu.py.
CHILD = """
import collections, os, runpy, sys
keep = tuple(name for name in sys.argv.pop(1).split(",") if name)
import processkit.containment.cgroup_v1 as v1
import processkit.containment.pool as pool
found = v1.own_groups
v1.ACCOUNTED = keep
v1.own_groups = lambda: {controller: path for controller, path in found().items() if controller in keep}
made = collections.Counter()
fresh = pool.Pool._fresh
def counted(self, parent, controllers):
    made[controllers[0]] += 1
    return fresh(self, parent, controllers)
pool.Pool._fresh = counted
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    print("made", " ".join(f"{kind}={count}" for kind, count in sorted(made.items())), flush=True)
"""


def one(variant: str, count: int) -> tuple[float, float, str]:
    env = dict(os.environ)
    if not variant:
        env["PROCESSKIT_ACCOUNTING"] = "0"
    out = subprocess.run(
        [sys.executable, "-c", CHILD, variant, os.path.join(HERE, "batch_cpu.py"), str(count), "--keep", "failed"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        check=True,
        text=True,
    ).stdout.splitlines()
    figures = out[0].split()
    return float(figures[1]), float(figures[4]), out[-1]


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    user: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    system: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    made: dict[str, list[str]] = {variant: [] for variant in VARIANTS}
    for _ in range(rounds):
        for variant in VARIANTS:
            u, s, groups = one(variant, count)
            user[variant].append(u)
            system[variant].append(s)
            made[variant].append(groups)
    print("| v1 accounting groups | user ms/job | system ms/job | CPU ms/job | groups made (each round) |")
    print("|---|---|---|---|---|")
    for variant in VARIANTS:
        u, s = statistics.median(user[variant]), statistics.median(system[variant])
        print(f"| {variant or 'none'} | {u:.3f} | {s:.3f} | {u + s:.3f} | {'; '.join(made[variant])} |")


if __name__ == "__main__":
    main()
