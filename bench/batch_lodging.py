"""A batch's host state on or off the ext4 (issue 26): the same batch run by two source trees
in turn, each in a fresh process, A B B A ... so the ext4 allocator's memory of recent deletions
(which makes every later creation slower, see processkit/rundir.py) weighs on both alike.

Each call runs N jobs of `true` (`--jobs 2`, a stream and capture per job, --out in the temp
dir) through `processkit.cli.main.main` and reports its wall time and its own user and system
CPU (rusage, children excluded). Medians per tree. The --out trees are removed only at the
end, so no call pays for the deletions of the one before it; with `--remove-each` each is
removed right after its call, as a farm cleaning up between batches would, and every call pays
for the deletions before it.

    python3 bench/batch_lodging.py [--remove-each] [N] [ROUNDS] BEFORE_TREE [AFTER_TREE]

A tree is a checkout whose `processkit/` imports (with its built `_native` module); the after
tree defaults to this one.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, os, resource, sys, time
from processkit.cli.main import main
manifest, out = sys.argv[1], sys.argv[2]
started = time.perf_counter()
code = main(["batch", manifest, "--out", out, "--jobs", "2"])
wall = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"code": code, "wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime}))
"""


def one_call(tree: Path, manifest: Path, scratch: Path, remove: bool) -> dict:
    out = Path(tempfile.mkdtemp(dir=scratch))
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(manifest), str(out / "out")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=out,
    )
    if remove:
        subprocess.run(["rm", "-rf", str(out)], check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = sys.argv[1:]
    remove = "--remove-each" in args
    args = [arg for arg in args if arg != "--remove-each"]
    jobs, rounds, before = int(args[0]), int(args[1]), Path(args[2]).resolve()
    after = Path(args[3]).resolve() if len(args) > 3 else Path(__file__).resolve().parent.parent
    scratch = Path(tempfile.mkdtemp(prefix="batch-lodging-"))
    manifest = scratch / "m.jsonl"
    manifest.write_text("".join(json.dumps({"args": ["true"], "id": f"j{n}"}) + "\n" for n in range(jobs)))
    results: dict[str, list[dict]] = {"before": [], "after": []}
    for index in range(rounds):
        order = [("before", before), ("after", after)]
        if index % 2:
            order.reverse()
        for name, tree in order:
            results[name].append(one_call(tree, manifest, scratch, remove))
    subprocess.run(["rm", "-rf", str(scratch)], check=True)
    each = ", each --out removed after its call" if remove else ""
    print(f"{jobs} jobs of true, --jobs 2, {rounds} rounds (A B B A ...){each}; medians, per job:")
    for name, calls in results.items():
        wall = statistics.median(c["wall"] for c in calls)
        user = statistics.median(c["user"] for c in calls) / jobs * 1000
        system = statistics.median(c["sys"] for c in calls) / jobs * 1000
        print(f"  {name:6}  {jobs / wall:6.0f} jobs/s  user {user:.2f} ms  sys {system:.2f} ms  (wall {wall:.2f} s)")


if __name__ == "__main__":
    main()
