"""``resource_summary`` where no counter holds memory or CPU: on a forced ending the tree is
still alive at the read point, and its members' figures are summed from /proc, as the
reference does. A cgroup's own ``cpu.stat`` is kept after a natural exit (a deliberate
difference: the reference reports null there)."""

from __future__ import annotations

import signal

from conftest import start_cli, wait_for_file
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
        wait_for_file(ready, timeout=30)
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(30) == 107
    finally:
        runner.kill()
        runner.wait()
    events = check_stream(jsonl, 107)
    require_mechanism(events, containment)
    summary = one(events, "resource_summary")
    assert summary["read_error"] is False
    assert summary["peak_memory_bytes"] is not None and summary["peak_memory_bytes"] >= 64 * MiB, summary
    assert summary["total_cpu_ms"] is not None and summary["total_cpu_ms"] >= 150, summary


def test_a_cgroup_keeps_its_real_cpu_after_a_natural_exit(tmp_path, containment):
    burn = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass"
    _, events = run_checked(tmp_path, command=python_child(burn), returncode=0)
    require_mechanism(events, containment)
    summary = one(events, "resource_summary")
    if containment == "cgroup_v2":
        assert summary["total_cpu_ms"] is not None and summary["total_cpu_ms"] >= 150, summary
    else:  # nothing counts for a process group, and nothing is left alive to sum
        assert (summary["peak_memory_bytes"], summary["total_cpu_ms"]) == (None, None), summary
