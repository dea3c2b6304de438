"""A whole benchmark's wall time, `bench` against hyperfine: 200 × `sleep 0.02` by default.

Each round runs every `processkit-cli` given (e.g. the tree before and after a change) and
hyperfine on the same command with the same run count, the order turning by one each round, so
load from other work hits every side alike. Reports per side the median wall and CPU (the whole
tool's, its children's included, `os.wait4`) and the median of the per-round ratios to
hyperfine's wall; with two CLIs, also the second's wall and CPU over the first's, round by round.

    python3 bench/bench_wall.py --rounds 7 --cli B/bin/processkit-cli --cli X/bin/processkit-cli

Without ``--pause`` a `bench` that follows another within a second finds the kernel's per-task
perf switch still on (``benchmark/perf_switch.py``) and skips a grace period the first pays.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole run of ``argv`` (its children's CPU included), spawned
    with /dev/null for its standard streams; a failure ends the script."""
    program = shutil.which(argv[0]) or argv[0]
    null = os.open(os.devnull, os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, null, fd) for fd in (0, 1, 2)] + [(os.POSIX_SPAWN_CLOSE, null)]
    try:
        started = time.perf_counter()
        _, status, usage = os.wait4(os.posix_spawn(program, argv, os.environ, file_actions=actions), 0)
        wall = time.perf_counter() - started
    finally:
        os.close(null)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[0]} failed")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--command", default="sleep 0.02")
    parser.add_argument("--cli", action="append", required=True, help="a processkit-cli to measure (repeatable)")
    parser.add_argument(
        "--pause",
        type=float,
        default=0.0,
        help="seconds slept before each side: 1.5 lets the kernel's per-task perf switch turn off, so each "
        "`bench` starts as one run alone does (its grace period included), not after the other's events",
    )
    args = parser.parse_args()
    tail = ["-N", "--runs", str(args.runs), "--style", "none", args.command]
    sides = {cli: [cli, "bench", *tail] for cli in args.cli}
    sides["hyperfine"] = ["hyperfine", *tail]
    names = list(sides)
    rounds: list[dict[str, tuple[float, float]]] = []
    for round_ in range(args.rounds):
        turn = round_ % len(names)
        done = {}
        for name in names[turn:] + names[:turn]:
            time.sleep(args.pause)
            done[name] = timed(sides[name])
        rounds.append(done)
    print(f"load average {os.getloadavg()[0]:.1f} at the end; {args.rounds} rounds of {args.runs} x {args.command!r}")
    print("| Side | wall (s) | CPU (s) | wall / hyperfine's, median (min-max) |")
    print("|---|---|---|---|")
    for name in names:
        ratios = [r[name][0] / r["hyperfine"][0] for r in rounds]
        wall = statistics.median(r[name][0] for r in rounds)
        cpu = statistics.median(r[name][1] for r in rounds)
        print(
            f"| {name} | {wall:.3f} | {cpu:.3f} | {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |"
        )
    if len(args.cli) == 2:
        first, second = args.cli
        walls = [r[second][0] / r[first][0] for r in rounds]
        cpus = [r[second][1] / r[first][1] for r in rounds]
        print(f"second / first: wall {statistics.median(walls):.3f} ({min(walls):.3f}-{max(walls):.3f}), ", end="")
        print(f"CPU {statistics.median(cpus):.3f} ({min(cpus):.3f}-{max(cpus):.3f})")


if __name__ == "__main__":
    main()
