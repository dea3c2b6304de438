"""`processkit-cli bench` against hyperfine and BenchExec's runexec, side by side, in rounds.

Each figure alternates the tools round by round (A B A B ...) and reports the median of the
per-round figures, so load from other work on the machine hits both alike. Needs `hyperfine`
and `runexec` (pip install benchexec) on PATH, and `processkit-cli` from the checkout's venv.

    python3 bench/bench_vs_hyperfine.py --rounds 5
    python3 bench/bench_vs_hyperfine.py --rounds 5 --true-only   # hyperfine alone, no runexec
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

ALLOCATE = "x = b'x' * (200 << 20)"
HOLDER = "import time; x = b'x' * (100 << 20); time.sleep(0.3)"
TREE = f'python3 -c "{HOLDER}" & python3 -c "{HOLDER}"; wait'
# A fixed amount of CPU work of about 50 ms here: a shell loop, no I/O, no sleep.
SPIN = "i=0; while [ $i -lt 75000 ]; do i=$((i+1)); done"


def exported(argv: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "b.json")
        subprocess.run(
            [*argv[:2], "--export-json", out, *argv[2:]],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with open(out) as handle:
            return json.load(handle)["results"][0]


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def runexec(argv: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            ["runexec", "--no-container", "--output", os.path.join(scratch, "out.log"), "--", *argv],
            capture_output=True,
            text=True,
            check=True,
            cwd=scratch,
        )
    facts = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return {"memory": int(facts["memory"].rstrip("B")), "cpu": float(facts["cputime"].rstrip("s"))}


def rsd(result: dict) -> float:
    return result["stddev"] / result["mean"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bench", default=shutil.which("processkit-cli") or "processkit-cli")
    parser.add_argument("--true-only", action="store_true", help="only `-N true`, mean and median (no runexec)")
    args = parser.parse_args()
    pk = [args.bench, "bench"]
    rows: dict[str, list[tuple[float, float]]] = {}

    def record(name: str, ours: float, theirs: float) -> None:
        rows.setdefault(name, []).append((ours, theirs))

    for _ in range(args.rounds):
        ours = exported([*pk, "--runs", "200", "--", "true"])
        theirs = exported(["hyperfine", "-N", "--runs", "200", "true"])
        record("`true`: reported mean (ms)", ours["mean"] * 1e3, theirs["mean"] * 1e3)
        record("`true`: reported median (ms)", ours["median"] * 1e3, theirs["median"] * 1e3)
        if args.true_only:
            continue
        for label, argv in (
            ("one process, 200 MiB", ["python3", "-c", ALLOCATE]),
            ("tree, 2 x 100 MiB", ["sh", "-c", TREE]),
        ):
            ours = exported([*pk, "--runs", "3", "--", *argv])
            reference = runexec(argv)
            peak = max(ours["tree_peak_memory_byte"])  # runexec's is the group's: ours of the same name
            record(f"{label}: peak memory (MiB)", peak / 2**20, reference["memory"] / 2**20)
            record(f"{label}: user+system CPU (ms)", (ours["user"] + ours["system"]) * 1e3, reference["cpu"] * 1e3)
        for count in ("50", "200"):
            ours_wall = wall([*pk, "--runs", count, "--", "sleep", "0.02"])
            theirs_wall = wall(["hyperfine", "-N", "--runs", count, "sleep 0.02"])
            record(f"{count} runs of `sleep 0.02`: whole benchmark (s)", ours_wall, theirs_wall)
        ours = exported([*pk, "--runs", "30", "--cpus", "1", "--", "sh", "-c", SPIN])
        theirs = exported(["hyperfine", "-N", "--runs", "30", f"sh -c '{SPIN}'"])
        record("50 ms CPU-bound, 30 runs: relative stddev (%)", rsd(ours) * 100, rsd(theirs) * 100)

    print("| Figure | processkit-cli bench | peer | ratio (median of rounds) |")
    print("|---|---|---|---|")
    for name, pairs in rows.items():
        ours_median = statistics.median(p[0] for p in pairs)
        theirs_median = statistics.median(p[1] for p in pairs)
        ratio = statistics.median(p[0] / p[1] for p in pairs if p[1])
        print(f"| {name} | {ours_median:.3f} | {theirs_median:.3f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
