"""What ``processkit.run`` costs over the CLI it drives, from a warm interpreter.

Three ways to run ``true``, interleaved round by round so load from elsewhere hits them alike:
``subprocess.run(["true"])`` (no runner at all), ``processkit-cli run`` started as a process with
the flags the API passes (the CLI's own start-up and run), and ``processkit.run(["true"])`` (the
same runner plus the API's checking, scratch files and reading back of the events). Reports the
medians and the median of the per-round difference API - CLI, the API's own cost; and the CPU
time spent in this process alone per call (``RUSAGE_SELF``: the launching and reading back,
not the runner), which load from elsewhere hardly moves.

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


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(call) -> tuple[float, float]:
    """Wall time of the call, and the CPU time this process spent on it."""
    cpu, started = own_cpu(), time.perf_counter()
    call()
    return time.perf_counter() - started, own_cpu() - cpu


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
        "processkit-cli run -- true (process)": lambda: subprocess.run(cli, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True),
        "processkit.run(['true'])": lambda: processkit.run(["true"], check=True),
    }
    for _ in range(args.warmup):
        for call in ways.values():
            call()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(args.n):
        for name, call in ways.items():
            samples[name].append(timed(call))
    names = list(ways)
    extra = [api[0] - cli[0] for cli, api in zip(samples[names[1]], samples[names[2]])]
    print(f"{args.n} interleaved rounds, load average {os.getloadavg()[0]:.1f}")
    for name in names:
        walls = sorted(wall for wall, _ in samples[name])
        cpu = statistics.median(cpu for _, cpu in samples[name])
        print(
            f"  {name:38s} wall median {statistics.median(walls) * 1000:7.1f} ms, p90 {walls[int(len(walls) * 0.9)] * 1000:7.1f} ms;"
            f" this process's CPU median {cpu * 1000:5.2f} ms"
        )
    print(f"  API over the CLI, median of per-round wall differences: {statistics.median(extra) * 1000:+.1f} ms")
    os.remove(jsonl)
    os.rmdir(scratch)


if __name__ == "__main__":
    main()
