"""How long a `processkit.run(["true"])` takes while another call of the same process samples a
tree of ``MEMBERS`` sleeping members with `snapshot_interval="1ms"` (the runner service's one loop
carries both), and how many samples that call's stream gained during each such run. Prints the
median alone, the median beside, their ratio and the median samples per run.

    python3 bench/snapshot_beside.py [MEMBERS]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import processkit

CALLS = 15


def timed() -> float:
    began = time.perf_counter()
    processkit.run(["true"])
    return time.perf_counter() - began


def sampled(path: str) -> int:
    with open(path, "rb") as stream:
        return sum(json.loads(line)["event"] == "members_snapshot" for line in stream.read().split(b"\n")[:-1])


def main(members: int) -> None:
    timed()  # the service started
    alone = statistics.median(timed() for _ in range(CALLS))
    path = os.path.join(tempfile.mkdtemp(), "heavy.jsonl")
    tree = f"i=0; while [ $i -lt {members} ]; do sleep 120 & i=$((i + 1)); done; echo up; read line"
    with processkit.start(
        ["sh", "-c", tree], snapshot_interval="1ms", stdin=subprocess.PIPE, stdout=subprocess.PIPE, jsonl=path
    ) as heavy:
        heavy.stdout.readline()
        beside, during = [], []
        for _ in range(CALLS):
            before = sampled(path)
            beside.append(timed())
            during.append(sampled(path) - before)
        heavy.kill()
        heavy.wait()
    middle = statistics.median(beside)
    print(
        f"alone {alone:.4f} s  beside {middle:.4f} s  ratio {middle / alone:.1f}  samples/run {statistics.median(during)}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1500)
