"""Where one ``processkit.run(["true"])`` waits, span by span, across both sides of the socket
(issue 49): the caller's own work before it sleeps and after it wakes, the wake-ups between the
processes, the service's work before the clone and after the child's exit, and the child's own
time between them. Wall time, from ``CLOCK_MONOTONIC`` stamps the caller and the service take
(``time.perf_counter_ns``: one clock for both processes), medians over ``-n`` calls after 50 to
warm up; beside them, ``subprocess.run(["true"])``'s median in alternating calls.

The service is this tree's, started with a few of its functions wrapped to take a stamp
(``Service.readable``, the native spawn's ``Pending``, the reaper's ``_collect``,
``Service.reply``): each wrapper costs a microsecond or two, inside the spans it bounds. The
spans are what the caller waits through, so they say what a cut there can win, where
``api_overhead.py --phases`` says what CPU each phase costs.

    python3 bench/api_spans.py -n 1000
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import processkit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_modules import service, shared  # noqa: E402

SERVICE = r"""
import atexit, json, time
from processkit.engine import reaper, spawn_native
from processkit.service import serve
stamp = time.perf_counter_ns
marks = {"recv": [], "clone": [], "cloned": [], "exited": [], "reply": [], "replied": []}
def wrapped(owner, name, before, after=None):
    plain = getattr(owner, name)
    def call(*args, **kwargs):
        marks[before].append(stamp())
        try:
            return plain(*args, **kwargs)
        finally:
            if after is not None:
                marks[after].append(stamp())
    setattr(owner, name, call)
wrapped(serve.Service, "readable", "recv")
wrapped(spawn_native.Pending, "__init__", "clone", "cloned")
wrapped(reaper.Reaper, "_collect", "exited")
wrapped(serve.Service, "reply", "reply", "replied")
atexit.register(lambda: open(OUT, "w").write(json.dumps(marks)))
serve.main()
"""


def latest_before(stamps: list[int], moment: int) -> int | None:
    """The last of the sorted ``stamps`` at or before ``moment``."""
    index = bisect.bisect_right(stamps, moment) - 1
    return stamps[index] if index >= 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="calls measured (default 1000)")
    options = parser.parse_args()
    plain = service.service_command
    with tempfile.NamedTemporaryFile(prefix="api-spans-", suffix=".json") as out:
        code = f"OUT = {out.name!r}\n{SERVICE}"
        service.service_command = lambda fd, caller: [sys.executable, "-c", code, *plain(fd, caller)[3:]]  # type: ignore[assignment]
        connection = shared.connection()
        readable = connection._readable
        sleeps: list[tuple[int, int]] = []

        class Stamped:  # the caller's one wait for its reply, stamped on both sides
            def poll(self, *args):
                started = time.perf_counter_ns()
                found = readable.poll(*args)
                sleeps.append((started, time.perf_counter_ns()))
                return found

        connection._readable = Stamped()
        calls: list[tuple[int, int]] = []
        theirs: list[int] = []
        for _ in range(50 + options.n):
            started = time.perf_counter_ns()
            processkit.run(["true"])
            calls.append((started, time.perf_counter_ns()))
            started = time.perf_counter_ns()
            subprocess.run(["true"])
            theirs.append(time.perf_counter_ns() - started)
        load = os.getloadavg()[0]
        connection.close()
        connection.process.wait()
        marks = json.load(open(out.name))
    spans: dict[str, list[float]] = {}
    for (begun, done), (slept, woke) in list(zip(calls, sleeps))[50:]:
        found = {key: latest_before(marks[key], woke) for key in marks}
        if any(value is None or value < begun for value in found.values()):
            continue
        moments = [
            ("the caller, from the call to its sleep", begun, slept),
            ("  the request's wake-up (the service reads it)", slept, found["recv"]),
            ("the service, from the request to the clone", found["recv"], found["clone"]),
            ("the spawn's call (the clone inside it)", found["clone"], found["cloned"]),
            ("the child, its exec and its exit, the exit's wake-up", found["cloned"], found["exited"]),
            ("the service, from the exit seen to the reply sent", found["exited"], found["replied"]),
            ("  of which the reply's send (it wakes the caller)", found["reply"], found["replied"]),
            ("  the reply's wake-up (the caller runs)", found["replied"], woke),
            ("the caller, from its wake to the result", woke, done),
            ("the whole call", begun, done),
        ]
        for label, start, end in moments:
            spans.setdefault(label, []).append((end - start) / 1000)
    print(
        f"run(['true']), wall per call in us, of {len(spans.get('the whole call', []))} calls, load {load:.1f}: median (p10-p90)"
    )
    for label, values in spans.items():
        deciles = statistics.quantiles(values, n=10)
        print(f"  {label:<58} {statistics.median(values):8.1f} ({deciles[0]:.0f}-{deciles[-1]:.0f})")
    label = "subprocess.run(['true']), in alternating calls"
    deciles = statistics.quantiles(theirs[50:], n=10)
    print(
        f"  {label:<58} {statistics.median(theirs[50:]) / 1000:8.1f} ({deciles[0] / 1000:.0f}-{deciles[-1] / 1000:.0f})"
    )


if __name__ == "__main__":
    main()
