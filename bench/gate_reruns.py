"""The ``--fail-if-slower`` gate, rerun: how often it fails an unchanged CPU-bound command measured
beside four CPU-bound neighbours (each its own contained run, as other CI jobs on a shared runner
are), and how often it catches a command doing 50 % more work without them, both against one
baseline measured without them.

    python3 bench/gate_reruns.py [--reruns 20] [--runs 10] [--cli processkit-cli]

Prints one line per rerun (its exit code, the figure the gate used, the change) and the counts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import signal
import subprocess
import tempfile
import time

SPIN = "while :; do :; done"


def words(size: int) -> str:
    draw = random.Random(47)
    vocabulary = ["".join(draw.choice("abcdefghij") for _ in range(draw.randint(2, 9))) for _ in range(3000)]
    return " ".join(draw.choice(vocabulary) for _ in range(size))


def bench(cli: list[str], directory: str, name: str, runs: int, *extra: str) -> tuple[int, dict]:
    out = os.path.join(directory, "out.json")
    done = subprocess.run(
        [*cli, "bench", "-N", "--runs", str(runs), "-n", "work", f"gzip -5 -c {name}", "--export-json", out, *extra],
        cwd=directory,
        capture_output=True,
    )
    with open(out) as handle:
        return done.returncode, json.load(handle)


def neighbours(cli: list[str], directory: str) -> list[subprocess.Popen]:
    started = []
    for index in range(4):
        stream = os.path.join(directory, f"n{index}.jsonl")
        started.append(
            subprocess.Popen(
                [*cli, "run", "--jsonl", stream, "--", "sh", "-c", SPIN],
                stdin=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        while not os.path.exists(stream) or b"run_started" not in open(stream, "rb").read():
            time.sleep(0.01)
    return started


def stop(started: list[subprocess.Popen]) -> None:
    for process in started:
        process.send_signal(signal.SIGTERM)
    for process in started:
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reruns", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cli", default="processkit-cli")
    args = parser.parse_args()
    cli = shlex.split(args.cli)
    with tempfile.TemporaryDirectory() as directory:
        text = words(60_000)
        with open(os.path.join(directory, "same.txt"), "w") as handle:
            handle.write(text)
        with open(os.path.join(directory, "more.txt"), "w") as handle:
            handle.write(text + " " + text[: len(text) // 2])
        code, first = bench(cli, directory, "same.txt", args.runs)
        os.rename(os.path.join(directory, "out.json"), os.path.join(directory, "base.json"))
        print("baseline:", code, first["processkit"]["host_load"])
        gate = ("--baseline", "base.json", "--fail-if-slower", "5")
        false_failures = detected = 0
        for rerun in range(args.reruns):
            started = neighbours(cli, directory)
            try:
                code, found = bench(cli, directory, "same.txt", args.runs, *gate)
            finally:
                stop(started)
            false_failures += code == 119
            show(f"busy {rerun + 1}", code, found)
        for rerun in range(args.reruns):
            code, found = bench(cli, directory, "more.txt", args.runs, *gate)
            detected += code == 119
            show(f"quiet, 50 % more work {rerun + 1}", code, found)
        print(f"unchanged beside 4 neighbours: {false_failures} of {args.reruns} failed the gate")
        print(f"50 % more work, no neighbours: {detected} of {args.reruns} failed the gate (119)")


def show(label: str, code: int, found: dict) -> None:
    if "gate" not in found:
        print(f"{label}: exit {code}, no gate decision (the benchmark failed)")
        return
    (decided,) = found["gate"]["commands"]
    (entry,) = found["baseline"]["commands"]
    share = found["processkit"]["host_load"]["others_cpu_share"]
    print(
        f"{label}: exit {code}, gate {decided['outcome']} by {decided['figure']} "
        f"({decided['change_percent']:+.1f} %), wall ratio {entry['ratio']:.2f}, others' share {share:.2f}"
    )


if __name__ == "__main__":
    main()
