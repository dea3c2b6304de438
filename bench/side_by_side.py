"""Time two shell-free commands side by side, alternating A B A B, and report medians and ratios.

Each run is measured from outside as a whole process: wall time, and the CPU time, page faults
(minor and major: the memory it touched, a count far steadier than time on a busy machine) and
peak RSS the kernel accounts to it and its waited-for descendants (``os.wait4``). Alternating the two
commands and taking the ratio pair by pair keeps a comparison honest on a noisy shared machine.
Peak RSS never reads below this script's own RSS: a child's ``ru_maxrss`` starts at its parent's
when it is spawned (exec carries the high-water mark over); throughput.py measures through a
small launcher for that reason.

    python3 bench/side_by_side.py -n 7 --a 'processkit-cli run --jsonl /tmp/b.jsonl -- true' \
        --b 'python3 -c pass'
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import time


def measure(argv: list[str], idle_stdin: bool = False) -> dict:
    """One run; ``idle_stdin`` gives it a pipe that this script holds open and never writes
    (the inherited pipe of ADR 0203, docs/adr-0203-stdin-probe.md), else /dev/null."""
    stdin, writer = os.pipe() if idle_stdin else (subprocess.DEVNULL, None)
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.Popen(argv, stdin=stdin, stdout=sink, stderr=sink)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if writer is not None:
        os.close(stdin)
        os.close(writer)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "faults": usage.ru_minflt + usage.ru_majflt,
        "rss_mib": usage.ru_maxrss / 1024,
        "code": proc.returncode,
    }


def summarize(name: str, runs: list[dict]) -> str:
    parts = []
    for key in ("wall", "cpu", "faults", "rss_mib"):
        values = [r[key] for r in runs]
        digits = 0 if key == "faults" else 4
        parts.append(
            f"{key} median {statistics.median(values):.{digits}f} (min {min(values):.{digits}f}, max {max(values):.{digits}f})"
        )
    codes = sorted({r["code"] for r in runs})
    return f"{name}: " + "; ".join(parts) + f"; exit codes {codes}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="command A (split like a shell would, never run by one)")
    parser.add_argument("--b", help="command B, for ratios A/B")
    parser.add_argument("-n", type=int, default=5, help="counted runs of each")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--idle-stdin", action="store_true", help="stdin: a pipe held open and never written")
    args = parser.parse_args()
    commands = [shlex.split(args.a)] + ([shlex.split(args.b)] if args.b else [])
    for _ in range(args.warmup):
        for argv in commands:
            measure(argv, args.idle_stdin)
    results: list[list[dict]] = [[] for _ in commands]
    for _ in range(args.n):
        for index, argv in enumerate(commands):
            results[index].append(measure(argv, args.idle_stdin))
    print(summarize("A", results[0]))
    if args.b:
        print(summarize("B", results[1]))
        for key in ("wall", "cpu", "faults"):
            ratios = [a[key] / b[key] for a, b in zip(*results) if b[key] > 0]
            if ratios:
                print(
                    f"A/B {key}: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"
                )


if __name__ == "__main__":
    main()
