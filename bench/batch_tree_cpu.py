"""The whole tree's CPU per job of a batch of N × `true` (`--jobs 2 --keep failed`) beside
`xargs -P2 -n1 true`'s: the batch process's own, its jobs' children's, and its page process's
(``batching.index``: started with the batch, it draws ``index.html`` at the end; its share is
measured by drawing the same ``--out`` again in a process of its own), then xargs's whole
(its own and its children's). On a machine whose cores are all busy, the jobs/s ratio of the
two tools is bounded by the inverse ratio of these sums: the figure ``bench/batch.py``'s
xargs row cannot pass whatever the jobs' own wait.

    python3 bench/batch_tree_cpu.py [N] [ROUNDS]
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def batch_round(count: int, directory: str) -> tuple[float, float, float]:
    """The batch process's, its jobs' and its page process's CPU seconds a job."""
    from processkit.batching import index
    from processkit.cli.main import main as cli

    manifest = os.path.join(directory, "manifest.jsonl")
    with open(manifest, "w") as handle:
        handle.writelines(json.dumps({"args": ["true"]}) + "\n" for _ in range(count))
    out = os.path.join(directory, "out")
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    try:
        cli(["batch", manifest, "--out", out, "--jobs", "2", "--keep", "failed"])
    except SystemExit:
        pass
    own, children = _cpu(resource.RUSAGE_SELF) - own, _cpu(resource.RUSAGE_CHILDREN) - children
    before = _cpu(resource.RUSAGE_CHILDREN)
    subprocess.run(index.command(out), input=index.DRAW + b"[]\n", check=True)  # no job's directory gone
    page = _cpu(resource.RUSAGE_CHILDREN) - before
    shutil.rmtree(out)
    return own / count, (children - page) / count, page / count


def xargs_round(count: int) -> float:
    before = _cpu(resource.RUSAGE_CHILDREN)
    subprocess.run(["xargs", "-P2", "-n1", "true"], input="".join(f"{n}\n" for n in range(count)).encode(), check=True)
    return (_cpu(resource.RUSAGE_CHILDREN) - before) / count


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    directory = tempfile.mkdtemp(prefix="pk-batch-tree-")
    rows = []
    try:
        batch_round(20, directory)  # untimed: the CLI's lazy imports stay out of the first round
        for _ in range(rounds):
            own, jobs, page = batch_round(count, directory)
            peer = xargs_round(count)
            rows.append((own, jobs, page, peer))
            print(
                f"ms a job: batch {own * 1e3:.3f}, its jobs {jobs * 1e3:.3f}, its page {page * 1e3:.3f}"
                f" (sum {(own + jobs + page) * 1e3:.3f}); xargs whole {peer * 1e3:.3f};"
                f" bound on the jobs/s ratio {peer / (own + jobs + page):.2f}",
                flush=True,
            )
    finally:
        shutil.rmtree(directory)
    bound = statistics.median(peer / (own + jobs + page) for own, jobs, page, peer in rows)
    print(f"median bound on batch / xargs jobs/s with every core busy: {bound:.2f}")


if __name__ == "__main__":
    main()
