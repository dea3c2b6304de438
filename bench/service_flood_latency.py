"""One thread's small call beside other threads' floods, in one process's runner service.

Usage: ``python bench/service_flood_latency.py [--floods 16] [--seconds 10] [--subprocess]``.
Prints the small call's (``run(["echo", "ok"], capture_output=True)``, every 50 ms) median and
longest latency before and during the floods (each thread capturing 20 MB again and again),
and how many flood calls ended meanwhile. ``--subprocess``: the same through ``subprocess.run``,
the baseline a caller compares with (bench/README.md, "The runner service's turns shared among
floods (svc71)")."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import threading
import time

FLOOD = ["sh", "-c", "head -c 20000000 /dev/zero"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--floods", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--subprocess", action="store_true")
    args = parser.parse_args()
    if args.subprocess:
        call = subprocess.run
    else:
        import processkit

        call = processkit.run
    call(["true"])
    stop, floods_stop, latencies, ended = threading.Event(), threading.Event(), [], []

    def small() -> None:
        while not stop.is_set():
            began = time.monotonic()
            done = call(["echo", "ok"], capture_output=True)
            latencies.append(time.monotonic() - began)
            assert done.stdout == b"ok\n", done
            time.sleep(0.05)

    def flood() -> None:
        while not floods_stop.is_set():
            done = call(FLOOD, capture_output=True)
            assert len(done.stdout) == 20000000
            ended.append(1)

    watcher = threading.Thread(target=small)
    watcher.start()
    time.sleep(1.0)
    before = len(latencies)
    threads = [threading.Thread(target=flood) for _ in range(args.floods)]
    for thread in threads:
        thread.start()
    time.sleep(args.seconds)
    during, count = latencies[before:], len(ended)
    stop.set()
    floods_stop.set()
    watcher.join()
    for thread in threads:
        thread.join()

    def said(values: list[float]) -> str:
        return f"{len(values)} calls, median {statistics.median(values) * 1000:.0f} ms, longest {max(values) * 1000:.0f} ms"

    print(f"before: {said(latencies[:before])}")
    print(f"during: {said(during)}; flood calls ended: {count}")


if __name__ == "__main__":
    main()
