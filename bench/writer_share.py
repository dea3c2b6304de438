"""A tree's CPU split into its writer's and the rest, for commands run side by side.

A capture's figure against ``tee`` is mostly the writer's CPU, and what the reader does to the
pipe moves it (a pipe once polled costs its writer on every write: bench/README.md, "A capture's
pipe never polled"). Each command is a shell-free string in which ``{cpu}`` stands for a file the
writer (``throughput.WRITER_C``, given a third argument) writes its own CPU seconds to. The
commands run alternately, A B C A B C, each measured as a whole process (``side_by_side.measure``);
printed: each one's medians (the tree's CPU, the writer's, the rest, wall) and the first's ratio
to each other's, pair by pair (median, min-max).

    cc -O2 -o W writer.c      # throughput.WRITER_C
    python3 bench/writer_share.py -n 11 \
      "AFTER/bin/processkit-cli run --jsonl /dev/shm/a.jsonl --capture-dir /dev/shm/ca --capture-max-bytes 2g -- W 100 200000000 {cpu}" \
      "BEFORE/bin/processkit-cli run --jsonl /dev/shm/b.jsonl --capture-dir /dev/shm/cb --capture-max-bytes 2g -- W 100 200000000 {cpu}" \
      "sh -c 'W 100 200000000 {cpu} | tee /dev/shm/tee.out >/dev/null'"
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from side_by_side import measure  # noqa: E402
from throughput import parse_size, touch  # noqa: E402

FIGURES = ("tree", "writer", "rest", "wall")


def one(command: str, cpu_file: Path, warm: int = 0) -> dict[str, float]:
    """One run of ``command``: its tree's CPU, its writer's (from ``cpu_file``), the rest, wall."""
    cpu_file.unlink(missing_ok=True)
    touch(warm)
    result = measure(shlex.split(command.replace("{cpu}", str(cpu_file))))
    if result["code"] != 0:
        raise SystemExit(f"exit {result['code']} from {command}")
    writer = float(cpu_file.read_text())
    return {"tree": result["cpu"], "writer": writer, "rest": result["cpu"] - writer, "wall": result["wall"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commands", nargs="+", help="shell-free commands; {cpu}: the writer's CPU file")
    parser.add_argument("-n", type=int, default=7, help="counted rounds")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument(
        "--touch", default="0", metavar="SIZE", help="memory made and freed before each run (e.g. 2g): see touch()"
    )
    args = parser.parse_args()
    runs: list[list[dict[str, float]]] = [[] for _ in args.commands]
    warm = parse_size(args.touch)
    with tempfile.TemporaryDirectory() as work:
        cpu_file = Path(work) / "writer-cpu"
        for round_ in range(args.warmup + args.n):
            for index, command in enumerate(args.commands):
                result = one(command, cpu_file, warm)
                if round_ >= args.warmup:
                    runs[index].append(result)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.n} rounds")
    for index, command in enumerate(args.commands):
        medians = ", ".join(f"{key} {statistics.median(r[key] for r in runs[index]):.3f} s" for key in FIGURES)
        print(f"[{index}] {command}\n    {medians}")
    for index in range(1, len(args.commands)):
        for key in FIGURES:
            ratios = [a[key] / b[key] for a, b in zip(runs[0], runs[index]) if b[key] > 0]
            print(f"[0]/[{index}] {key}: {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
