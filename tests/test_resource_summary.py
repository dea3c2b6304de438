"""``resource_summary`` on a forced ending and after a natural exit. A forced ending reads the
tree while it is still alive (a peak memory no counter holds is the live members' sum, as the
reference does); after a natural exit the kernel's counters (a cgroup's ``cpu.stat``, the
accounting groups, a subreaper's rusage) still hold the CPU (a deliberate difference: the
reference reports null there). test_accounting.py covers the figures mechanism by mechanism."""

from __future__ import annotations

import signal

from conftest import SAFETY_NET, start_cli, wait_for_file
from streams import PY, check_stream, one, python_child, require_mechanism, run_checked

MiB = 1024 * 1024
HOLD = """
import sys, time
block = bytearray(64 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
end = time.process_time() + 0.2
while time.process_time() < end:
    pass
open(sys.argv[1], "w").close()
time.sleep(60)
"""


def test_a_forced_ending_sums_the_live_members_memory_and_cpu(tmp_path, containment):
    jsonl, ready = tmp_path / "run.jsonl", tmp_path / "ready"
    runner = start_cli("run", "--jsonl", jsonl, "--no-echo", "--", PY, "-c", HOLD, ready)
    try:
        wait_for_file(ready)
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(SAFETY_NET) == 107
    finally:
        runner.kill()
        runner.wait()
    events = check_stream(jsonl, 107)
    require_mechanism(events, containment)
    summary = one(events, "resource_summary")
    assert summary["read_error"] is False
    assert summary["peak_memory_bytes"] is not None and summary["peak_memory_bytes"] >= 64 * MiB, summary
    assert summary["total_cpu_ms"] is not None and summary["total_cpu_ms"] >= 150, summary


def test_the_real_cpu_is_kept_after_a_natural_exit(tmp_path, containment):
    burn = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass"
    _, events = run_checked(tmp_path, command=python_child(burn), returncode=0)
    require_mechanism(events, containment)
    summary = one(events, "resource_summary")
    assert summary["total_cpu_ms"] is not None and summary["total_cpu_ms"] >= 150, summary
