"""The batch's loop turns a job: `batch_cpu.py`'s batch (N jobs of `true`, `--jobs 2` unless
given), with each turn of the host's loop counted by how many descriptors it found ready, the
turns that only looked (a zero timeout: a fresh run's look before its first step, docs in
engine/scheduler.py), and the exit tie's looks at the pipes (`OutputStream.let_go`, race69's),
on stderr after `batch_cpu.py`'s own line.

A `true` job's floor is two turns: its exec's report (the report pipe's end of file), then its
exit (the pidfd and both pipes' hang-ups, most often in one turn), plus the fresh run's look.

    python3 bench/batch_turns.py [N] [BATCH OPTIONS, e.g. --keep failed] 2>&1 >/dev/null | tail -1
"""

from __future__ import annotations

import collections
import sys

import batch_cpu

from processkit import readiness
from processkit.engine import streams


def main() -> None:
    ready: collections.Counter[int] = collections.Counter()
    looks = collections.Counter({"zero-timeout": 0, "let_go": 0})
    select = readiness.Selector.select
    let_go = getattr(streams.OutputStream, "let_go", None)  # race69's: none in the trees before it

    def counted_select(self, timeout=None):
        found = select(self, timeout)
        ready[len(found)] += 1
        looks["zero-timeout"] += timeout == 0
        return found

    def counted_let_go(self):
        looks["let_go"] += 1
        return let_go(self)

    readiness.Selector.select = counted_select
    if let_go is not None:
        streams.OutputStream.let_go = counted_let_go
    batch_cpu.main()
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    turns = sum(ready.values())
    print(
        f"turns {turns / count:.2f}/job  zero-timeout looks {looks['zero-timeout'] / count:.2f}/job"
        f"  let_go looks {looks['let_go']}  turns by descriptors ready {dict(sorted(ready.items()))}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
