"""Instructions a `bench` run of `true` costs in `bench`'s process, and its start-up's, by callgrind.

Instruction counts are steady where times are not (a busy host). For each interpreter given
(an install's `bin/python`, its processkit that install's): N1 and N2 runs of `true` on one
`bench` engine in process (`driver.Engine`), the per-run count being the difference over
N2 - N1; then its `processkit-cli bench -N --runs 1 --style none true` whole (the process
itself: a helper it forks is reported by callgrind apart, and starts from the count at its fork).
Under valgrind 3.19 `pidfd_open` is refused, so the engine takes its fallback wait: the same for
every side.

    python3 bench/bench_instructions.py B/bin/python X/bin/python
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile

IN_PROCESS = """
import inspect, sys
from processkit.benchmark import driver
from processkit.benchmark.plan import Options
ahead = {"ahead": True} if "ahead" in inspect.signature(driver.Engine).parameters else {}
engine = driver.Engine(Options(), **ahead)
for index in range(int(sys.argv[1])):
    engine.measure(("true",), None, str(index), "pipe")
engine.close()
"""


def refs(argv: list[str]) -> int:
    """The instructions of the first process ``argv`` starts (callgrind's ``I refs``)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "callgrind.%p")
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
            capture_output=True,
            text=True,
            check=True,
        )
    counts = {pid: int(n.replace(",", "")) for pid, n in re.findall(r"==(\d+)== I\s+refs:\s+([\d,]+)", done.stderr)}
    first = re.search(r"==(\d+)==", done.stderr)  # valgrind's banner: the process it started speaks first
    assert first is not None, done.stderr
    return counts[first.group(1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python", nargs="+", help="an install's interpreter")
    parser.add_argument("--runs", type=int, nargs=2, default=(30, 130), metavar=("N1", "N2"))
    args = parser.parse_args()
    first, second = args.runs
    for python in args.python:
        low = refs([python, "-c", IN_PROCESS, str(first)])
        high = refs([python, "-c", IN_PROCESS, str(second)])
        cli = os.path.join(os.path.dirname(python), "processkit-cli")
        startup = refs([cli, "bench", "-N", "--runs", "1", "--style", "none", "true"])
        print(f"{python}: {(high - low) / (second - first):,.0f} instructions a run; `bench --runs 1 true` {startup:,}")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
