"""The batch process's own cost per job: N jobs of `true` (`--jobs 2`, a stream and capture each)
run by `batch` in this very process, then its user and system CPU per job (its rusage, children
excluded), the wall time, how long the end's `index.html` took, the jobs' `duration_ms`, and its
voluntary and involuntary context switches per job (``sleeps``, ``preempted``), on
stdout (the batch's own lines go to stderr).

Run each version's tree in turn (`PYTHONPATH=TREE`), alternating, and compare medians. To see
the Python and kernel work without the file system's inode allocation (bench/README.md, "Batch"),
put every transient file on tmpfs in a private mount namespace (root):

    unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs /tmp &&
        XDG_RUNTIME_DIR=/dev/shm/pk-xdg TMPDIR=/dev/shm/pk-tmp python3 bench/batch_cpu.py 1000 2>/dev/null'

    python3 bench/batch_cpu.py [N] [BATCH OPTIONS, e.g. --keep failed] 2>/dev/null   # --jobs 2 unless given
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    for variable in ("XDG_RUNTIME_DIR", "TMPDIR"):
        if os.environ.get(variable):
            os.makedirs(os.environ[variable], mode=0o700, exist_ok=True)
    directory = tempfile.mkdtemp(prefix="pk-batch-cpu-")
    manifest = os.path.join(directory, "manifest.jsonl")
    with open(manifest, "w") as handle:
        handle.writelines(json.dumps({"args": ["true"]}) + "\n" for _ in range(count))
    out = os.path.join(directory, "out")
    from processkit.batching import index
    from processkit.cli.main import main as cli

    spent = [0.0]
    # The end's page: drawn by a process of its own (PageProcess.draw; Index.finish before).
    owner, name = (index.PageProcess, "draw") if hasattr(index, "PageProcess") else (index.Index, "finish")
    original = getattr(owner, name)

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started

    setattr(owner, name, timed)
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    try:
        jobs = [] if {"--jobs", "-j"} & set(sys.argv[2:]) else ["--jobs", "2"]  # 2 unless given
        cli(["batch", manifest, "--out", out, *jobs, *sys.argv[2:]])
    except SystemExit:
        pass
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    with open(os.path.join(out, "summary.jsonl")) as handle:
        durations = sorted(json.loads(line)["duration_ms"] for line in handle)
    shutil.rmtree(directory)
    print(
        f"user {(after.ru_utime - before.ru_utime) / count * 1000:.3f} ms/job"
        f"  sys {(after.ru_stime - before.ru_stime) / count * 1000:.3f} ms/job"
        f"  wall {wall:.3f} s  index {spent[0]:.3f} s"
        f"  duration_ms median {statistics.median(durations):.3f} p90 {durations[int(len(durations) * 0.9)]:.3f}"
        f"  sleeps {(after.ru_nvcsw - before.ru_nvcsw) / count:.2f}/job"  # voluntary switches: waits that slept
        f"  preempted {(after.ru_nivcsw - before.ru_nivcsw) / count:.2f}/job"
    )


if __name__ == "__main__":
    main()
