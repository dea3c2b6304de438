"""A job whose command exits leaving processes of its tree running (a daemon it started, killed at
its cleanup): nextest's leaky test. The batch said it only in the job's stream
(``cleanup_started.members_before``); its summary line, terminal line, closing count, page and
JUnit say it now, and a job that leaves nothing reads as before."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from conftest import run_cli
from streams import require_mechanism, seconds_between

from processkit.batching.limits import LEAK_TIMEOUT_SECONDS
from processkit.engine.race import EXIT_DRAIN_SECONDS


def read_events(path) -> list[dict]:
    return [json.loads(text) for text in path.read_text().splitlines()]


BATCH_FAILED = 117
JOBS = [
    {"id": "clean", "args": ["true"]},
    {"id": "leaky", "args": ["sh", "-c", "sleep 300 >/dev/null 2>&1 & exit 0"]},
    {"id": "leaky-fail", "args": ["sh", "-c", "sleep 300 >/dev/null 2>&1 & sleep 300 >/dev/null 2>&1 & exit 3"]},
]


def test_a_job_that_leaves_processes_running_is_said_leaky_everywhere(tmp_path, containment):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in JOBS))
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    proc = run_cli("batch", manifest, "--out", out, "--junit", junit, "--jobs", "1")
    assert proc.returncode == BATCH_FAILED, proc.stderr  # a leak fails no job: leaky-fail's exit 3 does
    require_mechanism(read_events(out / "clean" / "events.jsonl"), containment)
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert "leaked" not in lines["clean"], "a job that leaves nothing has the line a v1 reader knows"
    assert (lines["leaky"]["exit_code"], lines["leaky"]["leaked"]) == (0, 1)
    assert (lines["leaky-fail"]["exit_code"], lines["leaky-fail"]["leaked"]) == (3, 2)
    for job_id in ("leaky", "leaky-fail"):  # the count is the one its stream's cleanup began with
        (began,) = [
            event for event in read_events(out / job_id / "events.jsonl") if event["event"] == "cleanup_started"
        ]
        assert began["members_before"] == lines[job_id]["leaked"]
    err = proc.stderr.decode().splitlines()
    assert any(text.startswith("batch: clean: exit 0 in ") for text in err)
    assert any(
        text.startswith("batch: LEAK leaky: exit 0 (left 1 process running, ended at its cleanup) in ") for text in err
    )
    assert any(
        text.startswith("batch: leaky-fail: exit 3 (left 2 processes running, ended at its cleanup) in ")
        for text in err
    )
    assert err[-1] == "batch: 2 of 3 jobs exited 0, 1 failed, 2 leaky (left processes running)"
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    assert cases["clean"].find("properties") is None
    for job_id, count in (("leaky", "1"), ("leaky-fail", "2")):
        (prop,) = cases[job_id].iter("property")
        assert (prop.get("name"), prop.get("value")) == ("leaked", count)
    assert "left 1 process running, ended at its cleanup" in (out / "index.html").read_text()


def test_a_batch_that_leaks_nothing_closes_as_before_and_probe_lists_leaks(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "clean", "args": ["sh", "-c", "sleep 0 & wait"]}) + "\n")
    proc = run_cli("batch", manifest, "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode().splitlines()[-1] == "batch: 1 of 1 job exited 0"
    probe = json.loads(run_cli("probe", "--json").stdout)
    assert "batch:leaks" in probe["surface"]


def test_a_leaky_jobs_line_read_back_from_its_stream_keeps_the_leak(tmp_path):
    """A Dask task that failed as a whole: its ended jobs' lines are read from their streams
    (``ended.line_from_stream``), and a leaky one's says so as the worker's line would have."""
    from processkit.batching.ended import line_from_stream
    from processkit.batching.manifest import jobs_from

    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in JOBS))
    out = tmp_path / "out"
    assert run_cli("batch", manifest, "--out", out).returncode == BATCH_FAILED
    written = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    label = read_events(out / "clean" / "events.jsonl")[0]["labels"]["batch"]
    for job in jobs_from(JOBS):
        line = line_from_stream(job, str(out), label)
        assert line is not None and line.leaked == written[job.id].get("leaked"), job.id


def test_a_process_the_command_killed_before_exiting_is_no_leak(tmp_path, containment):
    """``sleep 100 & kill $!; exit 0``: the shell's SIGTERM may still be pending on the sleep
    when the count is taken, the moment the command exits (about one job in four, under cgroup
    v2). A member with a fatal signal pending is dying, not left running: forty such jobs mark
    none leaky (before, all forty escaping the mark was about one chance in a hundred thousand)."""
    manifest = tmp_path / "m.jsonl"
    job = ["sh", "-c", "sleep 100 & kill $!; exit 0"]
    manifest.write_text("".join(json.dumps({"id": f"k{n}", "args": job}) + "\n" for n in range(40)))
    out = tmp_path / "out"
    proc = run_cli("batch", manifest, "--out", out, "--jobs", "2", timeout=300)
    assert proc.returncode == 0, proc.stderr
    require_mechanism(read_events(out / "k0" / "events.jsonl"), containment)
    leaky = [
        line["id"] for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines()) if "leaked" in line
    ]
    assert leaky == [], proc.stderr.decode()
    assert proc.stderr.decode().splitlines()[-1] == "batch: 40 of 40 jobs exited 0"


def test_a_job_that_leaves_its_pipes_held_waits_nextests_leak_bound_not_runs(tmp_path):
    """A job whose command exits while the ``sleep`` it started holds its output pipes: the job
    waits nextest's leak bound (``LEAK_TIMEOUT_SECONDS``) for their end of file, not ``run``'s
    5 s (``race.EXIT_DRAIN_SECONDS``), before its exit ends it, so a farm of leaking jobs pays
    100 ms a job; and a job's deadline that the 5 s would have overtaken leaves its exit 0 and
    its leak as they were."""
    jobs = [{"id": f"h{n}", "args": ["sh", "-c", "sleep 60 & echo hi"]} for n in range(4)]
    jobs.append({"id": "t", "args": ["sh", "-c", "sleep 60 & sleep 0.3; exit 0"], "timeout": 1})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    proc = run_cli("batch", manifest, "--out", out, "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert {job_id: (line["exit_code"], line.get("leaked")) for job_id, line in lines.items()} == {
        job["id"]: (0, 1) for job in jobs
    }
    for job in jobs[:4]:  # the root's exit, then the wait for the held pipes: the leak bound's
        waited = seconds_between(read_events(out / job["id"] / "events.jsonl"), "run_started", "root_exited")
        assert LEAK_TIMEOUT_SECONDS - 0.01 <= waited < EXIT_DRAIN_SECONDS / 4, job["id"]
