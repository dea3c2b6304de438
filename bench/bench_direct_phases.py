"""Where the wall between one `bench` sample's exit and the next one's clone goes, on the direct path.

`bench/bench_phases.py` splits the engine's run path (it sets ``PROCESSKIT_BENCH_PATH=engine``);
a command's sample whose output is discarded is carried by `benchmark/direct.py` instead, and
this splits that path: `processkit-cli bench ARGS` run in this interpreter (use an install's own
python), monotonic stamps taken around the direct sample's steps, each given as microseconds
after the root's exit as the kernel recorded it (the exit clock's, the interval's end), medians
over the samples. The stamps wrap the functions from outside, so a rename there breaks this
script, not `bench`.

    X/bin/python bench/bench_direct_phases.py -N --runs 200 --style none 'sleep 0.02'
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from processkit.benchmark import direct, driver
from processkit.cli import main as cli
from processkit.engine import spawn

stamp = time.monotonic_ns
samples: list[dict[str, int]] = []
current: dict[str, int] = {}

# Each mark: its key, and what it is (a "next" one is the following sample's).
MARKS = [
    ("woken", "the loop saw the ending (the wake-up, the reap, the signals' turn)"),
    ("read_tree", "the tree read starts (the ending's report before it)"),
    ("carried", "the tree's figures read and its end decided"),
    ("given_back", "the release starts"),
    ("released", "the release done (the container's gives, the slot)"),
    ("sampled", "the sample returns"),
    ("measured_from", "bench's drain and exit clock read done"),
    ("measured", "bench's measure returns (counters read, stop check, leftovers' look)"),
    ("next measure", "the next measure starts (the session between two runs)"),
    ("next sample", "the next sample starts (run_spec, counters ahead, exit clock open)"),
    ("next create", "the next containment's make starts"),
    ("next created", "the next containment made (the pool's takes)"),
    ("next begin", "the next spawn's request (the environment built)"),
    ("next begun", "the next clone returned"),
]


def wrap(owner, name: str, before: str | None = None, after: str | None = None) -> None:
    """``owner.name`` replaced by a call stamped ``before`` it and ``after`` it (first call of a sample)."""
    original = getattr(owner, name)

    def stamped(*args, **kwargs):
        if before:
            current.setdefault(before, stamp())
        value = original(*args, **kwargs)
        if after:
            current.setdefault(after, stamp())
        return value

    setattr(owner, name, stamped)


def stamp_all() -> None:
    global current
    wrap(direct, "sample", "sample", "sampled")
    wrap(direct.containment, "create", "create", "created")
    wrap(spawn, "begin", "begin", "begun")
    wrap(direct, "_carried", None, "carried")
    wrap(direct, "read_tree", "read_tree")
    wrap(direct, "given_back", "given_back", "released")
    settled = direct.Sample.settled

    def seen(self) -> bool:
        ended = settled(self)
        if ended:
            current.setdefault("woken", stamp())
        return ended

    direct.Sample.settled = seen
    measured_from = driver.measured_from

    def exited(outcome):
        current["exit"], current["measured_from"] = outcome.ended_ns or 0, stamp()
        return measured_from(outcome)

    driver.measured_from = exited
    measure = driver.Engine.measure

    def measured(self, argv, jsonl=None, iteration=None, output=None):
        global current
        current = {"measure": stamp()}
        value = measure(self, argv, jsonl, iteration, output)
        current["measured"] = stamp()
        if output is not None and current.get("exit") and "woken" in current:
            samples.append(current)
        return value

    driver.Engine.measure = measured


def main() -> None:
    stamp_all()
    try:
        cli.main(["bench", *sys.argv[1:]])
    except SystemExit:
        pass
    rows: dict[str, list[int]] = {key: [] for key, _ in MARKS}
    for sample, following in zip(samples, samples[1:]):
        marks = {**sample, **{f"next {key}": at for key, at in following.items()}}
        for key, _ in MARKS:
            if key in marks:
                rows[key].append(marks[key] - sample["exit"])
    print(f"{len(samples) - 1} gaps, load average {os.getloadavg()[0]:.1f}; us after the exit, medians:")
    for key, label in MARKS:
        if rows[key]:
            print(f"  {statistics.median(rows[key]) / 1e3:8.1f}  {label}")


if __name__ == "__main__":
    main()
