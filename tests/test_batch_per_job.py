"""What a batch job repeats that it need not (issue 49, batch52), counted from outside: the
stamps a passing ``--keep failed`` job's dropped events are given, and the reads of a lent v2
group's controllers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from test_batch import write_manifest

# The real ``batch`` in a process of its own, the emitter's clock formatter counted: each call
# is one event time (or the job line's start) made into text.
COUNTED = """
import sys
import processkit.events.emitter as emitter
made = [0]
real = emitter.utc_timestamp
def counted(*args, **kwargs):
    made[0] += 1
    return real(*args, **kwargs)
emitter.utc_timestamp = counted
from processkit.cli.main import main
try:
    code = main(["batch", sys.argv[1], "--out", sys.argv[2], "--jobs", "2", "--keep", "failed"])
except SystemExit as exc:
    code = exc.code
print(made[0], file=sys.stderr)
sys.exit(code)
"""
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_a_passing_held_jobs_dropped_events_are_never_given_a_time_as_text(tmp_path):
    """A passing ``--keep failed`` job's stream is dropped unread: the five events the job line
    does not read (run_started, the spawn snapshot, root_exited, the cleanup pair) keep the
    clock read at their emission and are stamped as text only if the stream is kept, as a
    failed job's is, whose times still read in order."""
    passing = 12
    jobs = [{"id": f"p{n}", "args": ["true"]} for n in range(passing)] + [{"id": "f", "args": ["false"]}]
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-c", COUNTED, str(write_manifest(tmp_path / "m.jsonl", jobs)), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 117, proc.stderr[-2000:]  # batch_failed: the one job that exits 1
    made = int(proc.stderr.strip().splitlines()[-1])
    # A job's line reads three events made records at once (runner_exit, resource_summary,
    # output_captured: stamped then) and its start (one more); the failed job's stream has
    # its eight. Each passing job used to make its five dropped events' times too (nine a job).
    assert made <= 5 * passing + 12, made  # (slack: a job slowed past 50 ms is published, and stamped)
    lines = [json.loads(line) for line in (out / "f" / "events.jsonl").read_text().splitlines()]
    assert [line["event"] for line in lines][:2] == ["run_started", "members_snapshot"]
    assert lines[-1]["event"] == "runner_exit" and len(lines) == 8
    times = [line["time"] for line in lines]
    assert all(STAMP.fullmatch(time) for time in times) and times == sorted(times)
    assert not (out / "p0").exists()


def test_a_lent_v2_groups_controllers_are_read_once_a_lend():
    """Whether a v2 group's controllers let it be kept idle is read once when it is made; given
    back, only its link count is looked at, and its controllers are read again when it is lent
    (``lent.restarted``): one read a lend, not one more at each give."""
    from processkit import rundir
    from processkit.containment import cgroup_v2, cgroupfs, pool

    parent = cgroup_v2.find_parent()
    if parent is None or os.geteuid() != 0:
        pytest.skip("no cgroup v2 parent group here")
    reads: list[str] = []
    real_content = cgroupfs.HeldFiles.content
    home = rundir.RunDir()
    home.holds_jobs = True
    lender = pool.Pool(home)
    rounds = 4
    try:
        cgroupfs.HeldFiles.content = lambda files, name: reads.append(name) or real_content(files, name)  # type: ignore[method-assign]
        groups = []
        for _ in range(rounds):
            group = lender.take(parent, pool.V2)
            groups.append(group)
            lender.give(group)
        assert all(group is groups[0] for group in groups), "the one idle group is lent again"
        assert reads.count("cgroup.controllers") <= rounds, reads
    finally:
        cgroupfs.HeldFiles.content = real_content  # type: ignore[method-assign]
        lender.close()
        home.close()
