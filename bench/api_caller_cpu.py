"""The calling thread's own CPU per ``processkit.run(["true"])`` (issue 49): what the caller's
side of a call costs, which the service's and the child's do not move. ``time.thread_time_ns``
around each call, after 100 to warm up; the median of each block of ``--calls`` calls, and the
median of the blocks. Run it under two installs, alternating, to compare their callers:

    B/bin/python bench/api_caller_cpu.py; X/bin/python bench/api_caller_cpu.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import processkit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=10, help="blocks of calls (default 10)")
    parser.add_argument("--calls", type=int, default=100, help="calls a block (default 100)")
    args = parser.parse_args()
    for _ in range(100):
        processkit.run(["true"])
    blocks = []
    for _ in range(args.blocks):
        spent = []
        for _ in range(args.calls):
            started = time.thread_time_ns()
            processkit.run(["true"])
            spent.append(time.thread_time_ns() - started)
        blocks.append(statistics.median(spent) / 1000)
    shown = ", ".join(f"{block:.0f}" for block in blocks)
    print(
        f"caller thread CPU per run(['true']), load average {os.getloadavg()[0]:.1f}: "
        f"median of block medians {statistics.median(blocks):.1f} us ({shown})"
    )


if __name__ == "__main__":
    main()
