"""`processkit-cli bench`'s cost per run against hyperfine's, in alternating pairs.

Two figures, each tool in turn within every round (A B A B ...), medians over rounds:
- the whole benchmark's wall time for RUNS runs of `sleep 0.02` (start-up included);
- the per-run cycle for `true`: (wall of `--runs BIG` - wall of `--runs SMALL`) / (BIG - SMALL),
  so each tool's start-up cancels out and what is left is what one more run costs.
`--before TREE` adds a third contender: this checkout's CLI with TREE (an older checkout's
source, e.g. `git archive main | tar -x -C TREE`, its `processkit/_native*.so` copied in) first
on PYTHONPATH.

    python3 bench/bench_cycle.py --rounds 7
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bytecode import compile_trees


def wall(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def installed_cli() -> str:
    """The script installed beside this interpreter, not a version manager's shim found first on
    PATH (pyenv's costs each start about 80 ms of shell and exec that no peer pays)."""
    beside = Path(sys.executable).parent / "processkit-cli"
    return str(beside) if beside.exists() else shutil.which("processkit-cli") or "processkit-cli"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=200, help="runs of `sleep 0.02` in the whole-benchmark figure")
    parser.add_argument("--big", type=int, default=600)
    parser.add_argument("--small", type=int, default=20)
    parser.add_argument("--bench", default=installed_cli())
    parser.add_argument("--before", metavar="TREE", help="also measure this source tree on PYTHONPATH")
    args = parser.parse_args()
    compile_trees(args.before)
    contenders: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "processkit-cli bench": ([args.bench, "bench"], None),
        "hyperfine -N": (["hyperfine", "-N"], None),
    }
    if args.before:
        env = {**os.environ, "PYTHONPATH": os.path.abspath(args.before)}
        contenders["before (--before)"] = ([args.bench, "bench"], env)
    whole: dict[str, list[float]] = {name: [] for name in contenders}
    cycle: dict[str, list[float]] = {name: [] for name in contenders}

    def runs(name: str, count: int, command: list[str]) -> list[str]:
        prefix = contenders[name][0]
        if name.startswith("hyperfine"):
            return [*prefix, "--runs", str(count), " ".join(command)]
        return [*prefix, "--runs", str(count), "--", *command]

    for _ in range(args.rounds):
        for name, (_, env) in contenders.items():
            whole[name].append(wall(runs(name, args.runs, ["sleep", "0.02"]), env))
            big = wall(runs(name, args.big, ["true"]), env)
            small = wall(runs(name, args.small, ["true"]), env)
            cycle[name].append((big - small) / (args.big - args.small) * 1e3)
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.rounds} rounds")
    print("| Figure | " + " | ".join(contenders) + " | ours / hyperfine (median of per-round ratios) |")
    print("|---|" + "---|" * len(contenders) + "---|")
    for label, figures in (
        (f"{args.runs} runs of `sleep 0.02`: whole benchmark (s)", whole),
        ("per-run cycle of `true` (ms)", cycle),
    ):
        ours, theirs = figures["processkit-cli bench"], figures["hyperfine -N"]
        ratio = statistics.median(a / b for a, b in zip(ours, theirs))
        medians = " | ".join(f"{statistics.median(values):.3f}" for values in figures.values())
        print(f"| {label} | {medians} | {ratio:.3f} |")
    for label, figures in (("whole", whole), ("cycle", cycle)):
        for name, values in figures.items():
            print(f"  {label} {name}: " + ", ".join(f"{v:.3f}" for v in values))


if __name__ == "__main__":
    main()
