"""Calls that flood their pipes share the runner service's loop turn by turn: in a turn with
several descriptors ready, each pipe's drain takes its share of the 4 MiB budget (at least
256 KiB), not the whole budget. Before, each of sixteen threads' floods (20 MB captured each)
took 4 MiB a turn, and another thread's `run(["echo", "ok"])`, a few turns long, waited behind
every one of them: 0.5-1 s a call (median) where subprocess took 6 ms (CHANGELOG, svc71).

Seen from outside: the service under ``strace``, the bytes each drain took in one turn (its
reads of one descriptor in a row, between two ``epoll_wait``s) against the share that turn's
ready count allows, plus one read (a drain ends on the read that crosses its budget). A run
whose child ended drains its pipes to their end in the same turn: a drain of its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import pytest

from conftest import SAFETY_NET

FLOODS = 8
BUDGET, FLOOR = 4 * 1024 * 1024, 256 * 1024

CALLER = r"""
import subprocess, sys, threading, time, processkit
from processkit.api import shared

processkit.run(["true"])
pid = shared.connection().process.pid
tracer = subprocess.Popen(["strace", "-qq", "-p", str(pid), "-o", sys.argv[1], "-e", "signal=none",
                           "-e", "trace=epoll_wait,epoll_pwait,read,readv,splice,close"])
while True:  # attached once the service's wait shows up in the trace
    if tracer.poll() is not None:  # strace could not attach (the service is not dumpable: root's alone)
        sys.exit(77)
    processkit.run(["true"])
    try:
        with open(sys.argv[1]) as trace:
            if "epoll" in trace.read():
                break
    except FileNotFoundError:  # strace has not made it yet
        pass
    time.sleep(0.05)

def flood():
    processkit.run(["head", "-c", "64000000", "/dev/zero"], capture_output=True, capture_max_bytes=1024)

threads = [threading.Thread(target=flood) for _ in range(int(sys.argv[2]))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
tracer.terminate()
tracer.wait()
"""


def drains(trace: str) -> list[tuple[int, int, bool]]:
    """Each drain of the traced loop: how many descriptors its turn's wait found ready, the bytes
    it took (reads of one descriptor in a row), and whether it was that pipe's last before its
    ``close`` (a pipe whose child ended, drained to its end in one go)."""
    found: list[list] = []
    latest: dict[int, int] = {}  # a descriptor's last drain, until it is closed
    ready, last = 0, None
    for line in trace.splitlines():
        if waited := re.match(r"epoll_p?wait\(.*\) = (\d+)", line):
            ready, last = int(waited.group(1)), None
        elif read := re.match(r"(?:read|readv|splice)\((\d+),.*\) = (\d+)$", line):
            fd, count = int(read.group(1)), int(read.group(2))
            if fd == last:
                found[-1][1] += count
            else:
                found.append([ready, count, False])
                latest[fd] = len(found) - 1
            last = fd
        else:
            if closed := re.match(r"close\((\d+)\) = 0", line):
                if (index := latest.pop(int(closed.group(1)), None)) is not None:
                    found[index][2] = True
            last = None
    return [(ready, took, ended) for ready, took, ended in found]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace(1) to see the service's turns")
def test_floods_in_one_service_take_a_share_of_a_turn_each(tmp_path, pump_backend):
    trace = tmp_path / "trace"
    done = subprocess.run(
        [sys.executable, "-c", CALLER, str(trace), str(FLOODS)],
        cwd=tmp_path,
        capture_output=True,
        timeout=SAFETY_NET * 3,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    if done.returncode == 77:
        pytest.skip("strace could not attach to the service (not dumpable: root's ptrace alone)")
    assert done.returncode == 0, done.stderr
    text = trace.read_text()
    one_read = max((int(n) for n in re.findall(r"^(?:read|readv|splice)\(.*\) = (\d+)$", text, re.M)), default=0)
    shared = [(ready, took) for ready, took, ended in drains(text) if ready >= 4 and took and not ended]
    assert shared, text[-4000:]  # the floods met in the loop's turns
    over = [(ready, took) for ready, took in shared if took > max(FLOOR, BUDGET // ready) + one_read]
    assert not over, (over[:5], one_read)
