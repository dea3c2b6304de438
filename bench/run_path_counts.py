"""What one run costs the runner's own process, counted rather than timed: its system calls
(``strace -c``, the runner's process only, not its children) and its Python function calls
(``cProfile``), per job of ``batch --keep failed`` and per run of ``bench``, for this checkout and,
with ``--before TREE``, an older source tree (``git archive REV | tar -x -C TREE``, its
``processkit/_native*.so`` copied in). Counts do not move with the machine's load, as the times
beside them in bench/README.md do; each is the total over the session divided by its runs, so
start-up is spread in.

    python3 bench/run_path_counts.py [--runs 1000] [--before TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROFILED = """
import cProfile, pstats, sys
sys.path.insert(0, {tree!r})
from processkit.cli.main import main
profile = cProfile.Profile()
profile.runcall(main, {argv!r})
print(pstats.Stats(profile).total_calls, file=sys.stderr)
"""


def syscalls(tree: str, argv: list[str], work: Path) -> int:
    """The runner's own system calls (``strace -c``'s total), children not followed."""
    report = work / "strace.txt"
    env = {**os.environ, "PYTHONPATH": tree}
    subprocess.run(
        ["strace", "-c", "-o", str(report), sys.executable, "-m", "processkit", *argv],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    total = report.read_text().splitlines()[-1].split()
    return int(total[3])


def python_calls(tree: str, argv: list[str], work: Path) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", PROFILED.format(tree=tree, argv=argv)],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    return int(proc.stderr.decode().split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--before", metavar="TREE")
    args = parser.parse_args()
    trees = {"this checkout": str(Path(__file__).resolve().parent.parent)}
    if args.before:
        trees["before"] = os.path.abspath(args.before)
    work = Path(tempfile.mkdtemp(prefix="run-path-counts-"))
    try:
        manifest = work / "m.jsonl"
        manifest.write_text("".join(json.dumps({"id": f"j{n}", "args": ["true"]}) + "\n" for n in range(args.runs)))
        sessions = {
            "batch --keep failed, 1 job of true": ["batch", str(manifest), "--jobs", "2", "--keep", "failed"],
            "bench, 1 run of true": ["bench", "--runs", str(args.runs), "--", "true"],
        }
        print("| per run | " + " | ".join(trees) + " |")
        print("|---|" + "---|" * len(trees))
        for name, argv in sessions.items():
            for what, count in (("system calls", syscalls), ("Python calls", python_calls)):
                cells = []
                for tree in trees.values():
                    out = work / "out"
                    extra = ["--out", str(out)] if argv[0] == "batch" else []
                    cells.append(f"{count(tree, argv + extra, work) / args.runs:.1f}")
                    shutil.rmtree(out, ignore_errors=True)
                print(f"| {name}: {what} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
