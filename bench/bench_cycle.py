"""`processkit-cli bench`'s cost per run against hyperfine's, in alternating pairs.

Two figures, each tool in turn within every round (A B A B ...), medians over rounds:
- the whole benchmark's wall time for RUNS runs of `sleep 0.02` (start-up included);
- the per-run cycle for `true`: (wall of `--runs BIG` - wall of `--runs SMALL`) / (BIG - SMALL),
  so each tool's start-up cancels out and what is left is what one more run costs.
`--before TREE` adds a third contender: this checkout's CLI with TREE (an older checkout's
source, e.g. `git archive main | tar -x -C TREE`, its `processkit/_native*.so` copied in) first
on PYTHONPATH. `--cli PATH` (repeatable) measures installed CLIs instead (e.g. a regular install
of the tree before a change and one after), each against hyperfine and against the first given;
the contenders' order turns by one each round, so none is always first after hyperfine. Each
whole benchmark's CPU (the tool's and its children's, `wait4`) is reported beside its wall.

    python3 bench/bench_cycle.py --rounds 7
    python3 bench/bench_cycle.py --rounds 9 --cli B/bin/processkit-cli --cli X/bin/processkit-cli
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
    return timed(argv, env)[0]


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole run of ``argv``, its children's CPU included."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[0]} failed")
    return elapsed, usage.ru_utime + usage.ru_stime


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
    parser.add_argument("--cli", action="append", help="an installed processkit-cli to measure (repeatable)")
    args = parser.parse_args()
    if args.cli:
        clis(args)
        return
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


def clis(args: argparse.Namespace) -> None:
    """``--cli``: each installed CLI and hyperfine, the order turning each round; per-round
    ratios to hyperfine and to the first CLI given, their medians (and ranges) reported."""
    names = [f"{Path(cli).parent.parent.name}" for cli in args.cli] + ["hyperfine"]
    prefix = {name: [cli, "bench", "-N", "--style", "none"] for name, cli in zip(names, args.cli)}
    prefix["hyperfine"] = ["hyperfine", "-N", "--style", "none"]
    figures: dict[str, dict[str, list[float]]] = {
        figure: {name: [] for name in names} for figure in ("wall", "cpu", "cycle")
    }
    for round_ in range(args.rounds):
        turn = round_ % len(names)
        for name in names[turn:] + names[:turn]:
            wall_s, cpu_s = timed([*prefix[name], "--runs", str(args.runs), "sleep 0.02"])
            figures["wall"][name].append(wall_s)
            figures["cpu"][name].append(cpu_s)
            big = timed([*prefix[name], "--runs", str(args.big), "true"])[0]
            small = timed([*prefix[name], "--runs", str(args.small), "true"])[0]
            figures["cycle"][name].append((big - small) / (args.big - args.small) * 1e3)
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.rounds} rounds")
    labels = {
        "wall": f"{args.runs} x `sleep 0.02`, whole benchmark wall (s)",
        "cpu": f"{args.runs} x `sleep 0.02`, whole benchmark CPU (s)",
        "cycle": f"per-run cycle of `true` ({args.big} - {args.small} runs, ms)",
    }
    for figure, values in figures.items():
        print(f"{labels[figure]}:")
        for name in names:
            line = f"  {name}: median {statistics.median(values[name]):.4f}"
            for other in dict.fromkeys(["hyperfine", names[0]]):
                if other != name:
                    ratios = [a / b for a, b in zip(values[name], values[other])]
                    line += f"; / {other} {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
            print(line)
            print("    " + ", ".join(f"{v:.4f}" for v in values[name]))


if __name__ == "__main__":
    main()
