"""A KeyboardInterrupt inside one run's step (the batch engine in a caller's own process, as a
Dask worker's thread runs it; SIGINT landing while a job's spawn runs) hangs nothing: that run ends as the runner's failure,
the others with their cancellation, every stream ends with ``runner_exit``, nothing is left,
and the interrupt reaches the caller."""

from __future__ import annotations

import glob
import json
import signal
import subprocess
import sys
import time

from conftest import ended_after, read_events_tolerant, registry_entries
from run_groups import groups_of

GRACE_MS = 1000
MARKER = "30.0347"  # an argument no other process has

CALLER = f"""
import sys, time
from processkit.batching.on_host import Settings, run_batch
from processkit.batching.manifest import jobs_from
from processkit.engine import spawn

real_spawn = spawn.begin

def slow_spawn(argv, **options):
    if argv[-1] == "slow":  # a long step (as a FIFO env file's read was): where the SIGINT lands
        open(sys.argv[2], "w").close()
        time.sleep(60)
    return real_spawn(argv, **options)

spawn.begin = slow_spawn
jobs = [{{"args": ["sleep", "{MARKER}"], "id": f"s{{n}}", "grace": {GRACE_MS / 1000}}} for n in range(3)]
jobs.append({{"args": ["sh", "-c", "sleep {MARKER}", "slow"], "id": "slow"}})
try:
    run_batch(jobs_from(jobs), Settings(sys.argv[1], 4), signals=False)
except KeyboardInterrupt:
    sys.exit(42)
sys.exit(0)
"""


def _sleeping() -> int:
    """The s jobs' children that exist (each exec'd: its run may not have reported it yet, as a
    host goes on with the next job's step while a child execs)."""
    found = subprocess.run(["pgrep", "-f", f"^sleep {MARKER}$"], capture_output=True).stdout
    return len(found.split())


def test_sigint_inside_a_step_ends_every_job_and_then_reaches_the_caller(tmp_path, isolated_registry):
    out, marker = tmp_path / "out", tmp_path / "in-the-step"
    caller = subprocess.Popen([sys.executable, "-c", CALLER, str(out), str(marker)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and _sleeping() == 3):
            assert time.monotonic() < deadline and caller.poll() is None, "the jobs did not start"
            time.sleep(0.01)
        caller.send_signal(signal.SIGINT)
        took, err = ended_after(caller)
    finally:
        caller.kill()
    assert caller.returncode == 42, err
    assert took < GRACE_MS / 1000 + 2, f"{took:.2f}s after the SIGINT"
    for job in ("s0", "s1", "s2", "slow"):
        events = read_events_tolerant(out / job / "events.jsonl")
        assert events[-1]["event"] == "runner_exit", (job, events[-1:])
    assert read_events_tolerant(out / "slow" / "events.jsonl")[-1]["source"] == "internal"
    for n in range(3):
        events = read_events_tolerant(out / f"s{n}" / "events.jsonl")
        assert [e["source"] for e in events if e["event"] == "cancelled"] == ["ctrl_c"]
        assert events[-1]["code"] == 107
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert sorted(lines) == ["s0", "s1", "s2", "slow"]
    assert subprocess.run(["pgrep", "-f", f"sleep {MARKER}"], capture_output=True).stdout == b""
    assert glob.glob(f"/tmp/pkc-{caller.pid}-*") == glob.glob(f"/dev/shm/pkc-{caller.pid}-*") == []
    assert registry_entries(isolated_registry) == []
    assert groups_of(caller.pid) == [], "every job's cgroup is removed"
