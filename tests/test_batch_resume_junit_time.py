"""A ``--resume``'d batch's JUnit times its own run, as nextest's report does: its suite's
``time`` ran from the earlier batch's first job to this one's last, the earlier run and the
pause between counted, and its ``timestamp`` was the earlier run's. Process-level: two real
batches into one ``--out``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime

from conftest import run_cli

BATCH_FAILED = 117


def _suite(junit) -> tuple[ET.Element, dict[str, float]]:
    suite = ET.parse(junit).getroot().find("testsuite")
    return suite, {case.get("name"): float(case.get("time")) for case in suite.iter("testcase")}


def test_a_resumed_batchs_junit_times_its_own_jobs(tmp_path):
    flag = tmp_path / "fixed"
    jobs = [
        {"id": "slow", "args": ["sleep", "0.3"]},
        {"id": "fixed-later", "args": ["sh", "-c", f"test -e {flag}"]},
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    first = run_cli("batch", manifest, "--out", out, "--junit", tmp_path / "j1.xml", cwd=tmp_path)
    assert first.returncode == BATCH_FAILED, first.stderr
    flag.touch()
    again = run_cli("batch", manifest, "--out", out, "--resume", "--junit", tmp_path / "j2.xml", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert b"1 skipped (--resume: passed before)" in again.stderr

    before, _ = _suite(tmp_path / "j1.xml")
    suite, cases = _suite(tmp_path / "j2.xml")
    assert set(cases) == {"slow", "fixed-later"}, "the job passed before is still a test case, with its time"
    assert cases["slow"] >= 0.3
    # this batch ran one job: its suite's time is that job's, not 0.3 s of the earlier one and the pause
    assert abs(float(suite.get("time")) - cases["fixed-later"]) <= 0.002, (suite.attrib, cases)
    began = datetime.fromisoformat(suite.get("timestamp"))
    earlier = datetime.fromisoformat(before.get("timestamp"))
    assert (began - earlier).total_seconds() >= 0.3, "the timestamp is this batch's first start"


def test_a_batch_not_resumed_times_every_job_though_the_wall_clock_stepped_back(tmp_path):
    """Which jobs are the batch's own is told by identity, not by the clock: a non-resumed
    batch's JUnit whose start (``started_ns``) reads later than its jobs' ends, as after an NTP
    step back, still times them all (it said ``time="0.000"``). The renderer over a real
    batch's summary, the step made by the start passed in."""
    import time

    from processkit.report.batch_model import load
    from processkit.report.junit import junit_xml

    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"id": f"j{n}", "args": ["sleep", "0.1"]}) + "\n" for n in (1, 2)))
    out = tmp_path / "out"
    proc = run_cli("batch", manifest, "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    junit = tmp_path / "j.xml"
    junit.write_text(junit_xml(load(str(out)), str(out), time.time_ns() + 1_000_000_000))
    suite, cases = _suite(junit)
    assert float(suite.get("time")) >= max(cases.values()) >= 0.1, (suite.attrib, cases)
