"""A batch's C heap and its pool's memory groups, for a peak RSS that grows with the jobs (issue
45): N jobs of `true` (`--keep failed --jobs 2`) run by `batch` in this very process, then its
peak RSS, glibc's `mallinfo2` (the heap's size, in use and free: a heap that grows while what is
in use does not is held apart by blocks that outlive their neighbours), and how often the pool
made a memory group, found one still charged, and lent one again.

    PYTHONPATH=TREE python3 bench/batch_heap.py N 2>/dev/null

One JSON line on stdout. Run each tree in turn at two sizes: Python objects that grow show in
`tracemalloc` (tests/test_batch_flat_memory.py); this shows what it cannot see.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import resource
import shutil
import sys
import tempfile


class MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def count_groups(counts: collections.Counter) -> None:
    """Count the pool's memory groups made, and its tries at idle ones by their outcome."""
    from processkit.containment import pool

    fresh, restarted = pool.Pool._fresh, pool.restarted

    def counted_fresh(self, parent, controllers):
        if "memory" in controllers:
            counts["made"] += 1
        return fresh(self, parent, controllers)

    def counted_restarted(group, ahead):
        started = restarted(group, ahead)
        if "memory" in group.controllers:
            counts[{True: "lent again", None: "still charged", False: "removed"}[started]] += 1
        return started

    pool.Pool._fresh = counted_fresh
    pool.restarted = counted_restarted


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    work = tempfile.mkdtemp(prefix="pk-batch-heap-")
    try:
        manifest = os.path.join(work, "m.jsonl")
        with open(manifest, "w") as handle:
            handle.writelines('{"args": ["true"]}\n' for _ in range(count))
        counts: collections.Counter = collections.Counter()
        count_groups(counts)
        from processkit.cli.main import main as cli

        code = cli(["batch", manifest, "--out", os.path.join(work, "out"), "--keep", "failed", "--jobs", "2"])
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
        heap = libc.mallinfo2()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        mib = 1 << 20
        print(
            json.dumps(
                {
                    "jobs": count,
                    "exit": code,
                    "peak_rss_mib": round(peak, 2),
                    "heap_mib": round(heap.arena / mib, 2),
                    "heap_in_use_mib": round(heap.uordblks / mib, 2),
                    "heap_free_mib": round(heap.fordblks / mib, 2),
                    "memory_groups": dict(counts),
                }
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
