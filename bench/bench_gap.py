"""What a `bench` sample of `true` costs, counted, and two of its parts weighed in one process.

`--calls`: Python calls a sample (cProfile over the CLI's `main`, `--runs` 1,200 less 200, over
1,000: start-up taken out) of the processkit this interpreter imports (run it with an install's
own python). `--syscalls CLI`: system calls a sample of that CLI and its children (`strace -f
-c`, 600 less 200 runs, over 400). Counts do not move with the machine's load.

`--ab room|envp`: bench's thread CPU a run (`time.thread_time_ns` around `Engine.measure`) in
this process, the two variants alternating in blocks, the order turning each block; medians of
the block medians and of the pairs' ratios. `room`: the pool's idle memory groups with no room
for their files (each engine made with it, as `bench` was before bench55) against the room
`bench` leaves them. `envp`: the native spawn's envp made whole each spawn (its kept one dropped
before each run) against patched from the kept one (each run's `HYPERFINE_ITERATION` differs).

    X/bin/python bench/bench_gap.py --calls
    python3 bench/bench_gap.py --syscalls X/bin/processkit-cli
    X/bin/python bench/bench_gap.py --ab room --blocks 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time

TRUE = ["bench", "-N", "--style", "none", "true"]


def calls() -> float:
    import cProfile
    import pstats

    from processkit.cli import main as cli

    totals = []
    for runs in (200, 1200):
        profile = cProfile.Profile()
        profile.enable()
        try:
            cli.main([*TRUE[:-1], "--runs", str(runs), "true"])
        except SystemExit:
            pass
        profile.disable()
        totals.append(sum(entry[1] for entry in pstats.Stats(profile).stats.values()))  # type: ignore[attr-defined]
    return (totals[1] - totals[0]) / 1000


def syscalls(cli: str) -> dict[str, float]:
    counted = []
    with tempfile.TemporaryDirectory() as scratch:
        for runs in (200, 600):
            out = os.path.join(scratch, f"{runs}.txt")
            argv = ["strace", "-f", "-c", "-o", out, cli, *TRUE[:-1], "--runs", str(runs), "true"]
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            table = {}
            with open(out) as handle:
                for line in handle:
                    fields = line.split()
                    if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
                        table[fields[-1]] = int(fields[3])
            counted.append(table)
    return {name: (count - counted[0].get(name, 0)) / 400 for name, count in counted[1].items()}


def ab(what: str, blocks: int) -> None:
    from processkit import fdlimit
    from processkit.benchmark import driver
    from processkit.benchmark.plan import Options
    from processkit.engine import spawn_native

    sides = ("whole", "patched") if what == "envp" else ("none", "room")
    medians: dict[str, list[float]] = {side: [] for side in sides}
    engine = None
    if what == "envp":
        fdlimit._spare[:] = [1024]
        engine = driver.Engine(Options(), ends_descendants=False)
    runs = 0
    try:
        for block in range(blocks):
            for side in sides if block % 2 == 0 else sides[::-1]:
                if what == "room":
                    fdlimit._spare[:] = [0 if side == "none" else 1024]  # read as the pool is made
                    engine = driver.Engine(Options(), ends_descendants=False)
                assert engine is not None
                per = []
                for index in range(240):
                    runs += 1
                    if side == "whole":
                        spawn_native._ENVIRONMENT[0] = None
                    began = time.thread_time_ns()
                    engine.measure(("true",), None, str(runs), "pipe")
                    if index >= 40:  # the first runs of an engine make its groups
                        per.append(time.thread_time_ns() - began)
                medians[side].append(statistics.median(per) / 1000)
                if what == "room":
                    engine.close()
    finally:
        if engine is not None:
            engine.close()
    for side in sides:
        print(
            f"{side}: median {statistics.median(medians[side]):.1f} us ({' '.join(f'{m:.1f}' for m in medians[side])})"
        )
    pairs = [after / before for before, after in zip(medians[sides[0]], medians[sides[1]])]
    print(
        f"{sides[1]} / {sides[0]}: {statistics.median(medians[sides[1]]) / statistics.median(medians[sides[0]]):.3f}, pairs {statistics.median(pairs):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", action="store_true")
    parser.add_argument("--syscalls", metavar="CLI")
    parser.add_argument("--ab", choices=("room", "envp"))
    parser.add_argument("--blocks", type=int, default=8)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    if args.calls:
        print(f"Python calls a sample: {calls():.1f}")
    if args.syscalls:
        counts = syscalls(args.syscalls)
        shown = " ".join(
            f"{name}={count:.1f}" for name, count in sorted(counts.items(), key=lambda item: -item[1]) if count >= 0.5
        )
        print(f"system calls a sample: {sum(counts.values()):.1f} ({shown})")
    if args.ab:
        ab(args.ab, args.blocks)


if __name__ == "__main__":
    main()
