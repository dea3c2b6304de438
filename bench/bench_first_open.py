"""How long a `bench` process's first perf event takes to open, before and after a change.

The kernel turns its switch for per-task perf events on when the first one anywhere is opened,
waiting out an RCU grace period inside that `perf_event_open`, and off a second after the last
one is closed. Each CLI given runs `bench -N --runs 1 --style none true` in turn, 1.2 s apart
(so the switch is off again unless another process on the host holds such an event), under
`strace -f --seccomp-bpf -T` tracing only `perf_event_open` and `execve` (nothing else stops).
Reports, per CLI, the medians of: its process's first successful open, a helper's open (a
process of its own, `benchmark/perf_switch.py`), and the time from its exec to the first run's
exec of `true`.

    python3 bench/bench_first_open.py --rounds 9 B/bin/processkit-cli X/bin/processkit-cli
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

TIMED = re.compile(r"= (\d+) <([0-9.]+)>$")


def traced(cli: str) -> tuple[float, float | None, float]:
    """(the process's first open, a helper's open or None, exec to the first run's exec), in ms."""
    with tempfile.NamedTemporaryFile("r") as trace:
        argv = [cli, "bench", "-N", "--runs", "1", "--style", "none", "true"]
        subprocess.run(
            [
                "strace",
                "-f",
                "--seccomp-bpf",
                "-ttt",
                "-T",
                "-o",
                trace.name,
                "-e",
                "trace=perf_event_open,execve",
                *argv,
            ],
            stdout=subprocess.DEVNULL,
            check=True,
        )
        lines = trace.read().splitlines()
    main, started = lines[0].split()[0], float(lines[0].split()[1])
    opens = []
    for line in lines:
        found = TIMED.search(line) if "perf_event_open(" in line else None
        if found is not None:
            opens.append((line.split()[0], float(found.group(2)) * 1e3))
    own = next(spent for pid, spent in opens if pid == main)
    helper = next((spent for pid, spent in opens if pid != main), None)
    first_run = next(
        float(line.split()[1]) for line in lines if re.search(r'execve\("[^"]*/true"', line) and "= 0" in line
    )
    return own, helper, (first_run - started) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("cli", nargs="+", help="processkit-cli programs to compare")
    args = parser.parse_args()
    found: dict[str, list[tuple[float, float | None, float]]] = {cli: [] for cli in args.cli}
    for index in range(args.rounds):
        for cli in args.cli if index % 2 == 0 else args.cli[::-1]:
            time.sleep(1.2)
            found[cli].append(traced(cli))
    for cli, rounds in found.items():
        own = [r[0] for r in rounds]
        helpers = [r[1] for r in rounds if r[1] is not None]
        print(f"{cli}: first open median {statistics.median(own):.3f} ms (max {max(own):.3f})", end="")
        if helpers:
            print(f"; the helper's open median {statistics.median(helpers):.3f} ms (max {max(helpers):.3f})", end="")
        print(f"; exec to the first run's exec median {statistics.median(r[2] for r in rounds):.1f} ms")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
