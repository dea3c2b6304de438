"""Samples of `bench -N true` in its default 3 s against hyperfine's, and the CPU a sample costs.

Each round runs every `processkit-cli` given (e.g. the tree before and after a change) and then
`hyperfine -N true`, each with its default time budget; a sample's CPU is the whole tool's
(its own and its children's, `os.wait4`) over the samples it took. Reports the medians over
rounds and the per-round ratios' medians, so load from other work hits all sides alike.

    python3 bench/bench_samples.py --rounds 7 --cli A/bin/processkit-cli --cli B/bin/processkit-cli
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile


def sampled(argv: list[str]) -> tuple[int, float]:
    """(samples, CPU seconds of the whole tool) of one benchmark exporting its result."""
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "b.json")
        with open(os.devnull, "wb") as sink:
            proc = subprocess.Popen([*argv[:2], "--export-json", out, *argv[2:]], stdout=sink, stderr=sink)
            _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{argv[0]} failed")
        with open(out) as handle:
            samples = len(json.load(handle)["results"][0]["times"])
    return samples, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cli", action="append", required=True, help="a processkit-cli to measure (repeatable)")
    args = parser.parse_args()
    sides = {cli: [cli, "bench", "-N", "--style", "none", "true"] for cli in args.cli}
    sides["hyperfine"] = ["hyperfine", "-N", "--style", "none", "true"]
    rounds: list[dict[str, tuple[int, float]]] = []
    for _ in range(args.rounds):
        rounds.append({name: sampled(argv) for name, argv in sides.items()})
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    print("| Side | samples in 3 s | CPU per sample (ms) | samples / hyperfine's | CPU per sample / first side's |")
    print("|---|---|---|---|---|")
    first = args.cli[0]
    for name in sides:
        samples = statistics.median(r[name][0] for r in rounds)
        per = statistics.median(r[name][1] / r[name][0] * 1e3 for r in rounds)
        ratio = statistics.median(r[name][0] / r["hyperfine"][0] for r in rounds)
        cpu = statistics.median((r[name][1] / r[name][0]) / (r[first][1] / r[first][0]) for r in rounds)
        print(f"| {name} | {samples:.0f} | {per:.3f} | {ratio:.3f} | {cpu:.3f} |")


if __name__ == "__main__":
    main()
