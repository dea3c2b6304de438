"""A batch job stopped by hand (``cancel --run-id`` or ``kill --run-id``, the control plane's
verbs) under ``--retries``: the stop stands. It was retried as a failure, its retry passed, and
the batch said ``FLAKY 2/3`` and exited 0, the stop undone without a word; now it is not
retried, counted and named as cancelled (its exit the reference's 108 or 109), and the batch
exits 117 (a job did not exit 0)."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET

from conftest import SAFETY_NET, read_events_tolerant, run_cli, start_cli, wait_for_event
from streams import PY

BATCH_FAILED = 117
# Waits for the release file, then passes: a retry of it passes at once.
WAITER = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)"


def wait_attempt_over(job_dir) -> None:
    """Until the job's first attempt has its ``runner_exit``: in its stream, or in
    ``attempt-1/`` where a retry moved it (the starting tree's way, which this test refuses)."""
    deadline = time.monotonic() + SAFETY_NET
    while not any(event["event"] == "runner_exit" for event in read_events_tolerant(job_dir / "events.jsonl")):
        assert time.monotonic() < deadline, f"{job_dir}: the stopped attempt never ended"
        if (job_dir / "attempt-1" / "events.jsonl").exists():
            return
        time.sleep(0.01)


def test_a_job_cancelled_or_killed_by_hand_is_not_retried_and_counts_as_cancelled(tmp_path):
    release = tmp_path / "release"
    out = tmp_path / "out"
    jobs = [
        {"id": verb, "run_id": f"by-{verb}", "args": [PY, "-c", WAITER, str(release)]} for verb in ("cancel", "kill")
    ]
    jobs.append({"id": "bystander", "args": [PY, "-c", WAITER, str(release)]})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    junit = tmp_path / "junit.xml"
    batch = start_cli("batch", manifest, "--out", out, "--jobs", "3", "--retries", "2", "--junit", junit, cwd=tmp_path)
    try:
        for verb in ("cancel", "kill"):
            wait_for_event(out / verb / "events.jsonl", "run_started")
            assert run_cli(verb, "--run-id", f"by-{verb}", cwd=tmp_path).returncode == 0
            wait_attempt_over(out / verb)
        release.touch()  # a retry would pass at once now
        _, stderr = batch.communicate(timeout=SAFETY_NET)
    finally:
        if batch.poll() is None:  # the wait failed: its own batch, by handle
            batch.kill()
            batch.wait()
    said = stderr.decode().splitlines()
    assert batch.returncode == BATCH_FAILED, said
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    for verb, code, source in (("cancel", 108, "control_cancel"), ("kill", 109, "control_kill")):
        line = lines[verb]
        assert (line["exit_code"], line["source"], line["attempts"]) == (code, source, 1), line
        assert line["earlier_attempts"] == [] and not line.get("flaky"), line
        assert not (out / verb / "attempt-1").exists(), "no retry moved the stopped attempt aside"
        assert any(text.startswith(f"batch: {verb}: cancelled (exit {code})") for text in said), said
    assert lines["bystander"]["exit_code"] == 0
    assert not any("FLAKY" in text or "flaky" in text for text in said), said
    assert said[-1].startswith("batch: 1 of 3 jobs exited 0, 2 cancelled"), said
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "3" and suite.find(".//flakyFailure") is None
