"""bench's two sample paths side by side in one process: the direct sample (`benchmark/direct.py`)
against the engine's run path (`PROCESSKIT_BENCH_PATH=engine`), on one `bench` engine.

Run it with an install's own python (it measures that install's processkit). First the Python
calls a sample on each path (cProfile, 200 samples each), then `--rounds` rounds of `--runs`
samples a path, the order turning each round, each block's own CPU a sample (`RUSAGE_SELF`: bench,
the engine, the containment's system calls; the children's not in it), and the ratio round by
round. The command is `true` unless given after the options.

    X/bin/python bench/bench_paths.py --rounds 6 --runs 300
    X/bin/python bench/bench_paths.py --rounds 6 --runs 100 sleep 0.02
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import statistics

from processkit.benchmark import direct, driver
from processkit.benchmark.plan import Options

PATHS = ("direct", "engine")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("command", nargs="*", default=["true"])
    args = parser.parse_args()
    engine = driver.Engine(Options(), ends_descendants=True, lodged=True)
    argv = tuple(args.command)

    def block(runs: int, path: str) -> float:
        os.environ[direct.SWITCH] = path
        before = resource.getrusage(resource.RUSAGE_SELF)
        for index in range(runs):
            engine.measure(argv, iteration=str(index), output="null")
        after = resource.getrusage(resource.RUSAGE_SELF)
        return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / runs * 1e6

    try:
        for path in PATHS:
            block(30, path)  # each path's first samples: its imports and the pool's groups made
        for path in PATHS:
            os.environ[direct.SWITCH] = path
            profile = cProfile.Profile()
            profile.enable()
            for index in range(200):
                engine.measure(argv, iteration=str(index), output="null")
            profile.disable()
            print(f"{path}: {pstats.Stats(profile).total_calls / 200:.0f} Python calls a sample")
        own: dict[str, list[float]] = {path: [] for path in PATHS}
        for round_ in range(args.rounds):
            for path in PATHS if round_ % 2 == 0 else PATHS[::-1]:
                own[path].append(block(args.runs, path))
    finally:
        engine.close()
    for path, figures in own.items():
        print(f"{path}: own CPU a sample, µs: {[round(f) for f in figures]}, median {statistics.median(figures):.0f}")
    ratios = [a / b for a, b in zip(own["direct"], own["engine"])]
    print(f"direct / engine, round by round: {[round(r, 3) for r in ratios]}, median {statistics.median(ratios):.3f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
