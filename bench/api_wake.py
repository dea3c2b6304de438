"""Where a caller woken by a reply runs, and what the replier's work after the reply costs it
(issue 49): two processes over a socketpair, as the API's caller and its runner service. The
replier sleeps ``--before`` seconds (as the service sleeps through a child's run), stamps and
sends its reply, then works on for ``--after`` microseconds (as the service's restart of the
groups a run gave back); the caller stamps its wake-up. Medians over ``-n`` round trips, for
each ``--after``; ``--apart`` keeps the two on CPUs 0 and 1 (a diagnostic: the service never
sets its own or its caller's CPUs).

A wake-up that grows with ``--after`` is a caller woken onto the replier's CPU (a socket's
wake-up is a synchronous one), which runs only once the replier sleeps.

    python3 bench/api_wake.py -n 1000 --after 0 65 200
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import statistics
import time


def replier(sock: socket.socket, before: float, after_ns: int, cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    while sock.recv(64):
        time.sleep(before)
        sock.send(time.perf_counter_ns().to_bytes(8, "little"))
        busy = time.perf_counter_ns()
        while time.perf_counter_ns() - busy < after_ns:
            pass
    os._exit(0)


def wake_ups(n: int, before: float, after_us: int, apart: bool) -> list[float]:
    """The caller's wake-ups (µs), from the replier's stamp to the caller's poll returning."""
    mine, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        mine.close()
        replier(theirs, before, after_us * 1000, 1 if apart else None)
    theirs.close()
    if apart:
        os.sched_setaffinity(0, {0})
    readable = select.poll()
    readable.register(mine.fileno(), select.POLLIN)
    found = []
    try:
        for _ in range(n):
            mine.send(b"x")
            readable.poll()
            woke = time.perf_counter_ns()
            found.append((woke - int.from_bytes(mine.recv(64), "little")) / 1000)
    finally:
        mine.close()
        os.waitpid(pid, 0)
        if apart:
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="round trips for each --after (default 1000)")
    parser.add_argument("--before", type=float, default=0.001, help="the replier's sleep before it replies, s")
    parser.add_argument("--after", type=int, nargs="+", default=[0, 65, 200], help="its work after the reply, µs")
    parser.add_argument("--apart", action="store_true", help="the caller on CPU 0, the replier on CPU 1")
    options = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; the replier sleeps {options.before * 1e6:.0f} µs before each reply")
    for after in options.after:
        found = wake_ups(options.n, options.before, after, options.apart)
        deciles = statistics.quantiles(found, n=10)
        print(
            f"  work after the reply {after:4d} µs: the caller's wake-up {statistics.median(found):6.1f} µs"
            f" (p10 {deciles[0]:.0f}, p90 {deciles[-1]:.0f})"
        )


if __name__ == "__main__":
    main()
