"""What ``processkit.run`` costs over the CLI it drives, from a warm interpreter.

Three ways to run ``true``, interleaved round by round so load from elsewhere hits them alike:
``subprocess.run(["true"])`` (no runner at all), ``processkit-cli run`` started as a process with
the flags the API passes (the CLI's own start-up and run), and ``processkit.run(["true"])`` (the
same runner plus the API's checking, scratch files and reading back of the events). Reports the
medians and the median of the per-round difference API - CLI, the API's own cost; and CPU
times, which load from elsewhere hardly moves: this process's own per call (``RUSAGE_SELF``:
the launching and reading back, not the runner) and the total with the runner and its child
(``RUSAGE_CHILDREN`` added).

    python3 bench/api_overhead.py -n 41
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time

import processkit
from processkit.api.launch import runner_command


def cpu_times() -> tuple[float, float]:
    """CPU seconds of this process, and of it plus its waited-for descendants."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = own.ru_utime + own.ru_stime
    return mine, mine + children.ru_utime + children.ru_stime


def timed(call) -> tuple[float, float, float]:
    """Wall time of the call, the CPU time this process spent on it, and the CPU time of all."""
    (own, total), started = cpu_times(), time.perf_counter()
    call()
    wall = time.perf_counter() - started
    own_after, total_after = cpu_times()
    return wall, own_after - own, total_after - total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=41, help="rounds (default 41)")
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="api-overhead-")
    jsonl = os.path.join(scratch, "cli.jsonl")
    cli = runner_command() + ["--error-format", "json", "run", "--no-echo", "--jsonl", jsonl, "--", "true"]
    ways = {
        "subprocess.run(['true'])": lambda: subprocess.run(["true"], check=True),
        "processkit-cli run -- true (process)": lambda: subprocess.run(
            cli, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True
        ),
        "processkit.run(['true'])": lambda: processkit.run(["true"], check=True),
    }
    for _ in range(args.warmup):
        for call in ways.values():
            call()
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in ways}
    for _ in range(args.n):
        for name, call in ways.items():
            samples[name].append(timed(call))
    names = list(ways)
    print(f"{args.n} interleaved rounds, load average {os.getloadavg()[0]:.1f}")
    for name in names:
        walls = sorted(sample[0] for sample in samples[name])
        own, total = (statistics.median(sample[k] for sample in samples[name]) for k in (1, 2))
        print(
            f"  {name:38s} wall median {statistics.median(walls) * 1000:7.1f} ms, p90 {walls[int(len(walls) * 0.9)] * 1000:7.1f} ms;"
            f" CPU median: this process {own * 1000:5.2f} ms, with the runner {total * 1000:6.2f} ms"
        )
    for k, what in ((0, "wall"), (2, "total CPU")):
        extra = [api[k] - cli[k] for cli, api in zip(samples[names[1]], samples[names[2]])]
        print(f"  API over the CLI, median of per-round {what} differences: {statistics.median(extra) * 1000:+.1f} ms")
    os.remove(jsonl)
    os.rmdir(scratch)


if __name__ == "__main__":
    main()
