"""What one run costs the process that carries it, this checkout against another, in turn.

Two figures, each measured in a fresh process, the two trees alternating (A B A B ...), medians:
- a bench session's run: ``benchmark.driver.Engine.measure(("true",))`` RUNS times on one lodged
  host, after 20 warm-up runs: the process's user and system CPU per run (``os.times``), and
  its wall time per run;
- a batch job: ``processkit-cli batch`` of JOBS × ``true``, ``--jobs 2 --keep failed``, run in
  the measuring process: its own user and system CPU per job (rusage, children excluded) and
  jobs per second.
The other checkout is TREE (e.g. ``git archive main | tar -x -C TREE`` with
``processkit/_native*.so`` copied in), first on PYTHONPATH; this one is the installed package.

    python3 bench/run_cost.py --before TREE [--pairs 5] [--runs 400] [--jobs 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from bytecode import compile_trees

ENGINE = """
import os, sys, time
from processkit.benchmark.driver import Engine
from processkit.benchmark.plan import Options
count = int(sys.argv[1])
engine = Engine(Options())
for _ in range(20):
    engine.measure(("true",))
before, started = os.times(), time.perf_counter()
for _ in range(count):
    engine.measure(("true",))
after, wall = os.times(), time.perf_counter() - started
engine.close()
print((after.user - before.user) / count * 1e3, (after.system - before.system) / count * 1e3, wall / count * 1e3)
"""

BATCH = """
import json, os, resource, shutil, sys, tempfile, time
count = int(sys.argv[1])
work = tempfile.mkdtemp(prefix="pk-run-cost-")
manifest = os.path.join(work, "m.jsonl")
with open(manifest, "w") as handle:
    handle.writelines(json.dumps({"args": ["true"]}) + "\\n" for _ in range(count))
from processkit.cli.main import main
before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
try:
    main(["batch", manifest, "--out", os.path.join(work, "out"), "--jobs", "2", "--keep", "failed"])
except SystemExit:
    pass
wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
shutil.rmtree(work)
print((after.ru_utime - before.ru_utime) / count * 1e3, (after.ru_stime - before.ru_stime) / count * 1e3, count / wall)
"""


def measure(code: str, count: int, tree: str | None) -> list[float]:
    env = {**os.environ, "PYTHONPATH": tree} if tree else None
    proc = subprocess.run(
        [sys.executable, "-c", code, str(count)], capture_output=True, text=True, check=True, env=env, cwd="/tmp"
    )
    return [float(field) for field in proc.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="TREE", required=True)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()
    compile_trees(args.before)
    trees = {"before": os.path.abspath(args.before), "this": None}
    figures: dict[str, list[list[float]]] = {f"{what} {name}": [] for what in ("bench", "batch") for name in trees}
    for what, code, count in (("bench", ENGINE, args.runs), ("batch", BATCH, args.jobs)):
        for _ in range(args.pairs):
            for name, tree in trees.items():
                figures[f"{what} {name}"].append(measure(code, count, tree))
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.pairs} pairs; medians")
    labels = {
        "bench": ("user ms/run", "system ms/run", "wall ms/run"),
        "batch": ("user ms/job", "system ms/job", "jobs/s"),
    }
    for key, rows in figures.items():
        what = key.split()[0]
        medians = [statistics.median(column) for column in zip(*rows)]
        cpu = statistics.median(row[0] + row[1] for row in rows)
        shown = ", ".join(f"{label} {value:.3f}" for label, value in zip(labels[what], medians))
        print(f"{key:12} {shown}, CPU {cpu:.3f}   (CPU each: {', '.join(f'{r[0] + r[1]:.3f}' for r in rows)})")


if __name__ == "__main__":
    main()
