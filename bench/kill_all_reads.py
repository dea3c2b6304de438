"""How long ``CgroupV2.kill_all``'s look after ``cgroup.kill`` holds the runner's loop, for a
group of many members (containment/cgroup_v2.py).

Each round makes a fresh cgroup v2 group below the runner's parent (``cgroup_v2.find_parent``),
starts N ``sleep`` processes in it, writes ``cgroup.kill`` and times what ``kill_all`` does
next: ``cgroup.procs`` read and the look for a member whose main thread ended alone
(``members.kill_ended_alone``), given ``cgroup.threads`` where the install has it
(``cgroupfs.subtree_ids``). Prints one JSON line: the install, each round's members still
listed and milliseconds, and their median. Needs root and a writable cgroup2 parent. Run it under
two installs, alternating, to compare them (bench/README.md):

    python3 bench/kill_all_reads.py --members 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

from processkit.containment import cgroup_v2, cgroupfs, members


RMDIR_SECONDS = 60  # the killed members' exit, which a loaded host drags out: past it, something else holds the group


def one_round(group: str, count: int) -> tuple[int, float]:
    """Members still listed after the kill, and the look's milliseconds."""
    os.mkdir(group)
    ready, told = os.pipe()
    script = f"echo $$ > {group}/cgroup.procs; i=0; while [ $i -lt {count} ]; do sleep 1000 & i=$((i+1)); done; echo >&{told}; wait"
    shell = subprocess.Popen(["sh", "-c", script], pass_fds=(told,))
    os.close(told)
    os.read(ready, 1)  # every member started
    os.close(ready)
    with open(os.path.join(group, "cgroup.kill"), "w") as handle:
        handle.write("1")
    start = time.perf_counter()
    with open(os.path.join(group, "cgroup.procs")) as handle:
        pids = [int(pid) for pid in handle.read().split()]
    if not hasattr(cgroupfs, "subtree_ids"):  # the starting tree: every listed member read
        members.kill_ended_alone(pids)
    elif pids:
        members.kill_ended_alone(pids, set(cgroupfs.subtree_ids(group, "cgroup.threads")))
    took = (time.perf_counter() - start) * 1000
    shell.wait()
    give_up = time.monotonic() + RMDIR_SECONDS
    while True:
        try:
            os.rmdir(group)
            break
        except OSError as exc:  # its members still leaving
            if time.monotonic() > give_up:
                raise SystemExit(f"{group} still busy after {RMDIR_SECONDS} s: {exc}") from None
            time.sleep(0.01)
    return len(pids), took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    parent = cgroup_v2.find_parent()
    if parent is None:
        raise SystemExit("no cgroup v2 parent group here")
    group = os.path.join(parent, f"processkit-bench-kill-{os.getpid()}")
    rounds = [one_round(group, options.members) for _ in range(options.rounds)]
    print(
        json.dumps(
            {
                "install": os.path.dirname(os.path.dirname(members.__file__)),
                "listed": [listed for listed, _ in rounds],
                "ms": [round(took, 2) for _, took in rounds],
                "median_ms": round(statistics.median(took for _, took in rounds), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
