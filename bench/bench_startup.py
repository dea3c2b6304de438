"""Where `bench`'s start-up and end go, step by step, in its own process.

Runs `processkit-cli bench ARGS` in this interpreter (use an install's own python) as the
launcher does (the finder installed, the collector's threshold raised), with monotonic stamps
around its steps: the CLI's and `bench`'s imports, the perf helper's fork (`os.fork`, in the
launcher's finder or `cli/bench.py`), the parse, the plan, the engine's set-up (with the wait for the helper, `perf_switch.settle`),
the first run up to its clone, the first and second runs, and the end (the last run to the
engine's close and `main`'s return). Milliseconds from the script's first line, medians of
`--repeat` processes; the interpreter's own start before that line is `python3 -c pass`'s.
The stamps wrap functions from outside, so a rename there breaks this script, not `bench`.

    X/bin/python bench/bench_startup.py --repeat 7 -N --runs 3 --style none 'sleep 0.02'
    X/bin/python bench/bench_startup.py --repeat 12 --pause 1.5 -N --runs 1 --style none true

``--pause 1.5`` lets the kernel's per-task perf switch turn off before each process (it stays on
for a second after the last event is closed), so the wait for the perf helper is a lone run's.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import sys, time
stamp = time.monotonic_ns
began = stamp()
marks = {}
import gc
gc.set_threshold(16_000)
del sys.path[0]  # as the launcher does: the working directory ("" under -c) is never searched
import os
fork = os.fork
def forked():  # the perf helper's fork, wherever it is made (the launcher's finder, or cli/bench.py)
    marks.setdefault("perf helper forked", stamp())
    return fork()
os.fork = forked
from processkit.cli.quickimport import install
install()
import processkit.cli.main as cli
marks["cli.main imported"] = stamp()
import processkit.cli.bench as command
marks["cli.bench imported"] = stamp()
from processkit.benchmark import driver, perf_switch
from processkit.engine import spawn_native
marks["the engine's modules imported"] = stamp()

def wrap(owner, name, label, once=True):
    original = getattr(owner, name)
    def stamped(*args, **kwargs):
        if not (once and label + " <" in marks):
            marks[label + " <"] = stamp()
        try:
            return original(*args, **kwargs)
        finally:
            if not (once and label + " >" in marks):
                marks[label + " >"] = stamp()
    setattr(owner, name, stamped)

wrap(perf_switch, "settle", "perf helper waited for")
wrap(command, "parse", "parse")
wrap(command, "plan_from", "plan")
wrap(driver.Engine, "__init__", "engine set up")
wrap(driver.Engine, "close", "engine closed")
wrap(spawn_native.Pending, "__init__", "first clone")
measure, count = driver.Engine.measure, [0]
def measured(self, *args, **kwargs):
    count[0] += 1
    marks.setdefault(f"run {min(count[0], 3)} <", stamp())
    try:
        return measure(self, *args, **kwargs)
    finally:
        marks["last run >"] = stamp()
driver.Engine.measure = measured
cli.main(sys.argv[1:])
marks["main returned"] = stamp()
for label, at in sorted(marks.items(), key=lambda item: item[1]):
    print(f"{(at - began) / 1e6:.3f} {label}")
"""


def main() -> None:
    argv = sys.argv[1:]
    repeat, pause = 5, 0.0
    if argv[:1] == ["--repeat"]:
        repeat, argv = int(argv[1]), argv[2:]
    if argv[:1] == ["--pause"]:  # seconds before each process: the kernel's perf switch off, as for one run alone
        pause, argv = float(argv[1]), argv[2:]
    found: dict[str, list[float]] = {}
    for _ in range(repeat):
        time.sleep(pause)
        out = subprocess.run(
            [sys.executable, "-c", CHILD, "bench", *argv], capture_output=True, text=True, check=True
        ).stdout
        for line in out.splitlines():
            at, label = line.split(" ", 1)
            found.setdefault(label, []).append(float(at))
    print(f"medians of {repeat} processes, ms from the script's first line; load average {os.getloadavg()[0]:.1f}")
    for label, values in sorted(found.items(), key=lambda item: statistics.median(item[1])):
        print(f"  {statistics.median(values):8.2f}  {label}")
    waits = [b - a for a, b in zip(found["perf helper waited for <"], found["perf helper waited for >"])]
    print("the wait for the perf helper, each process (ms):", " ".join(f"{wait:.1f}" for wait in sorted(waits)))


if __name__ == "__main__":
    main()
