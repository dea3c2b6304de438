"""A batch's peak memory against its number of jobs (issue 45's target): N × `true` with
`--keep failed --jobs 2`, the batch process's own peak RSS (its rusage, children excluded),
and beside it the largest of its children's (the page process drawing `index.html`, the jobs).

    python3 bench/batch_memory.py N [N ...] [--tree TREE]

Each N's manifest is written to a temporary directory, the batch run there, and the directory
removed. ``--tree TREE``: another checkout's source (``git archive REV | tar -x -C TREE``, its
``processkit/_native*.so`` copied in) runs the same sizes, for the figures before a change.
The ratio printed is each size's peak against the first size's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

# Run in the measured process: the CLI's main, then its own and its children's peak RSS.
MEASURED = """
import resource, sys
from processkit.cli.main import main
code = main(sys.argv[1:])
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(code, own, children, file=sys.stderr)
"""


def measure(count: int, tree: str | None) -> tuple[float, float, float]:
    """Wall seconds, the batch process's peak RSS and its children's largest (MiB)."""
    work = tempfile.mkdtemp(prefix="batch-memory-")
    try:
        manifest = os.path.join(work, "m.jsonl")
        with open(manifest, "w") as handle:
            handle.writelines('{"args": ["true"]}\n' for _ in range(count))
        env = dict(os.environ)
        if tree is not None:
            env["PYTHONPATH"] = tree
        argv = [sys.executable, "-c", MEASURED, "batch", manifest, "--out", os.path.join(work, "out")]
        started = time.perf_counter()
        proc = subprocess.run(
            [*argv, "--keep", "failed", "--jobs", "2"],
            env=env,
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - started
        code, own, children = proc.stderr.strip().splitlines()[-1].split()
        if code != "0":
            raise SystemExit(f"the batch of {count} exited {code}: {proc.stderr[-2000:]}")
        return wall, int(own) / 1024, int(children) / 1024
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(args: list[str]) -> None:
    tree = None
    if "--tree" in args:
        at = args.index("--tree")
        tree = args[at + 1]
        del args[at : at + 2]
    sizes = [int(arg) for arg in args] or [10_000, 100_000]
    first = None
    print(f"{'jobs':>9} {'wall s':>8} {'jobs/s':>7} {'batch peak MiB':>15} {'x first':>8} {'children MiB':>13}")
    for count in sizes:
        wall, own, children = measure(count, tree)
        first = first or own
        print(
            f"{count:>9} {wall:>8.1f} {count / wall:>7.0f} {own:>15.1f} {own / first:>8.3f} {children:>13.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
