"""One recorder for every way a batch runs its jobs: the typed line written once and read back
(``--resume``, ``--history``, the page) through the same type; the halt and the jobs never
started; the local and the Dask path writing the same lines for the same jobs; and a Dask task
whose worker is killed mid-batch, whose ended jobs keep the outcome their streams say."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess

import pytest

from conftest import SAFETY_NET, run_cli, start_cli
from test_batch import write_manifest
from local_cluster import local_cluster

JOBS = [
    {"args": ["sh", "-c", "echo out; echo err >&2"], "id": "ok"},
    {"args": ["sh", "-c", "echo bad >&2; exit 3"], "id": "fails"},
    {"args": ["sleep", "30"], "id": "slow", "timeout": 0.3},
    {"args": ["no-such-program-here"], "id": "absent"},
    {"args": ["sh", "-c", "echo hidden"], "id": "secret", "secret": True},
]


def dask_batch(manifest, out, address: str, *flags: str):
    """``batch`` of ``manifest`` into ``out`` on the Dask cluster at ``address``."""
    return run_cli("batch", manifest, "--out", out, *flags, "--dask-scheduler", address, timeout=120)


def summary(out) -> list[dict]:
    return [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]


def comparable(line: dict, out) -> dict:
    """A line with what differs between two runs of the same job taken out (its run, its times
    and measured figures) and its paths made relative to its ``--out``."""
    drop = {"run_id", "started_at", "duration_ms", "resources"}
    kept = {key: value for key, value in line.items() if key not in drop}
    kept["capture"] = {
        name: None if info is None else {**info, "path": os.path.relpath(info["path"], out)}
        for name, info in line["capture"].items()
    }
    kept["earlier_attempts"] = [
        {key: value for key, value in attempt.items() if key not in drop} for attempt in line["earlier_attempts"]
    ]
    return kept


def test_the_written_line_is_the_typed_line_and_reads_back_as_the_same(tmp_path):
    """Every line run_batch returns is what summary.jsonl holds, in the documented key order,
    and JobLine.read gives back an equal line: one type from the end of a job to its reading."""
    from processkit.batching.on_host import Settings, run_batch
    from processkit.batching.manifest import jobs_from
    from processkit.summary_line import JobLine

    out = tmp_path / "out"
    lines, counts = run_batch(jobs_from(JOBS), Settings(str(out), 2, retries=1), signals=False)
    written = summary(out)
    assert [line.to_json() for line in lines] == written
    assert [JobLine.read(value) for value in written] == lines
    assert list(written[0]) == [
        "id",
        "run_id",
        "args_sha256",
        "job_sha256",
        "command",
        "started_at",
        "exit_code",
        "source",
        "child_code",
        "duration_ms",
        "attempts",
        "resources",
        "capture",
        "message",
        "earlier_attempts",
    ]
    by_id = {line.id: line for line in lines}
    assert by_id["ok"].stdout.sha256 == hashlib.sha256(b"out\n").hexdigest()
    assert by_id["ok"].stdout.bytes == by_id["ok"].stdout.bytes_seen == 4
    assert by_id["secret"].command is None and by_id["ok"].command == JOBS[0]["args"]
    assert [attempt.dir for attempt in by_id["fails"].earlier_attempts] == ["attempt-1"]
    assert (counts.succeeded, counts.failed, counts.timed_out) == (2, 2, 1)


def test_halt_records_every_job_not_started_once(tmp_path):
    """After the first failure nothing starts; each job left gets one ``halted`` line, counted
    as not started, and the closing sentence says so."""
    from processkit.batching.on_host import Settings, run_batch
    from processkit.batching.manifest import jobs_from

    jobs = [{"args": ["true"], "id": "first"}, {"args": ["false"], "id": "breaks"}]
    jobs += [{"args": ["true"], "id": f"left{n}"} for n in range(3)]
    out = tmp_path / "out"
    seen: list[tuple[str, int]] = []
    lines, counts = run_batch(
        jobs_from(jobs),
        Settings(str(out), 1, halt_on_failure=True),
        lambda line, so_far: seen.append((line.id, so_far.not_started)),
        signals=False,
    )
    assert [(line.id, line.exit_code, line.source) for line in lines] == [
        ("first", 0, "child_exit"),
        ("breaks", 1, "child_exit"),
        ("left0", None, "halted"),
        ("left1", None, "halted"),
        ("left2", None, "halted"),
    ]
    assert seen == [("first", 0), ("breaks", 0), ("left0", 1), ("left1", 2), ("left2", 3)]
    assert [line["id"] for line in summary(out)] == [line.id for line in lines]
    assert counts.sentence() == "1 of 5 jobs exited 0, 1 failed, 3 not started, halted by --halt-on-failure"


def test_resume_and_history_read_each_field_for_its_type(tmp_path):
    """An earlier summary is untrusted: a line whose exit_code is ``false`` or ``0.0`` (equal to
    0 in Python, but no exit code) does not make ``--resume`` skip the job, and ``--history``
    takes no duration or peak of the wrong type."""
    from processkit.report.batch_model import history

    manifest = write_manifest(tmp_path / "m.jsonl", [{"args": ["true"], "id": name} for name in ("a", "b", "c")])
    out = tmp_path / "out"
    assert run_cli("batch", manifest, "--out", out).returncode == 0
    first = {line["id"]: line for line in summary(out)}
    edited = [
        {**first["a"], "exit_code": False, "duration_ms": True, "resources": {"peak_memory_bytes": True}},
        {**first["b"], "exit_code": 0.0, "resources": {"peak_memory_bytes": 5.5}},
        {**first["c"], "duration_ms": 12.5, "resources": {"peak_memory_bytes": 4096}},
        {"id": 7, "exit_code": 0},
        "not an object",
    ]
    (out / "summary.jsonl").write_text("".join(json.dumps(line) + "\n" for line in edited))
    took, peaks = history(str(out / "summary.jsonl"))
    assert took == {"b": first["b"]["duration_ms"], "c": 12.5} and peaks == {"c": 4096}
    proc = run_cli("batch", manifest, "--out", out, "--resume")
    assert proc.returncode == 0, proc.stderr
    appended = summary(out)[len(edited) :]
    assert sorted(line["id"] for line in appended) == ["a", "b"], "only c's line says exit 0"


def test_a_resumed_batch_reports_only_its_own_jobs(tmp_path):
    """``--resume`` with a manifest that no longer has a job that failed before: the JUnit said
    ``failures="1"`` and the page showed it while the batch exited 0 and counted 2 of 2 (a CI's
    report disagreed with its gate). The page and the JUnit now leave it out and a warning says
    the summary keeps its line."""
    import xml.etree.ElementTree as ET

    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    first = write_manifest(tmp_path / "1.jsonl", [{"args": ["true"], "id": "a"}, {"args": ["false"], "id": "dropped"}])
    assert run_cli("batch", first, "--out", out).returncode == 117
    second = write_manifest(tmp_path / "2.jsonl", [{"args": ["true"], "id": "a"}, {"args": ["true"], "id": "b"}])
    proc = run_cli("batch", second, "--out", out, "--resume", "--junit", junit)
    assert proc.returncode == 0, proc.stderr
    assert b"does not have (dropped): the page and the reports leave them out" in proc.stderr, proc.stderr
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "0" and [case.get("name") for case in suite.iter("testcase")] == ["a", "b"]
    assert "dropped" not in (out / "index.html").read_text()
    assert sorted(line["id"] for line in summary(out)) == ["a", "b", "dropped"], "the summary keeps every line"


def test_a_halted_resume_that_read_every_job_leaves_out_those_it_no_longer_has(tmp_path):
    """``--resume --halt-on-failure`` with a manifest (read to its end as the halted jobs are
    recorded): every job was met, so a job the manifest dropped is left out of the JUnit, with
    the warning. The halt once kept the old failure in the report beside the batch's own."""
    import xml.etree.ElementTree as ET

    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    first = write_manifest(tmp_path / "1.jsonl", [{"args": ["true"], "id": "a"}, {"args": ["false"], "id": "dropped"}])
    assert run_cli("batch", first, "--out", out).returncode == 117
    jobs = [{"args": ["true"], "id": "a"}, {"args": ["false"], "id": "c"}, {"args": ["true"], "id": "d"}]
    second = write_manifest(tmp_path / "2.jsonl", jobs)
    proc = run_cli("batch", second, "--out", out, "--resume", "--halt-on-failure", "--jobs", "1", "--junit", junit)
    assert proc.returncode == 117, proc.stderr
    assert b"does not have (dropped): the page and the reports leave them out" in proc.stderr, proc.stderr
    assert sorted(case.get("name") for case in ET.parse(junit).getroot().iter("testcase")) == ["a", "c", "d"]


def test_a_halted_resume_whose_pipe_was_never_read_to_its_end_leaves_out_no_job(tmp_path):
    """``--resume --halt-on-failure`` with a template reading a pipe that stays open: the halt
    leaves its rest unread, so the earlier jobs not met are no measure of this batch's: no
    warning, and the JUnit keeps their lines."""
    import xml.etree.ElementTree as ET

    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    template = ["--", "sh", "-c", "case $1 in *1) exit 1;; esac", "sh", "{}"]
    first = run_cli("batch", "--out", out, *template, stdin=None, input=b"x0\nz1\ny0\n")
    assert first.returncode == 117, first.stderr
    args = ["--out", out, "--resume", "--halt-on-failure", "--jobs", "1", "--junit", junit, *template]
    with open(tmp_path / "stderr", "wb") as sink:
        proc = start_cli("batch", *args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=sink)
    assert proc.stdin is not None
    with proc.stdin:  # y0 never comes: the pipe stays open until the batch is over
        proc.stdin.write(b"x0\nz1\n")
        proc.stdin.flush()
        try:
            code = proc.wait(timeout=SAFETY_NET)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail("the halted batch kept reading its open stdin")
    stderr = (tmp_path / "stderr").read_bytes()
    assert code == 117, stderr
    assert b"does not have" not in stderr, stderr
    assert sorted(case.get("name") for case in ET.parse(junit).getroot().iter("testcase")) == ["x0", "y0", "z1"]


def test_the_local_and_the_dask_path_write_the_same_lines(tmp_path):
    pytest.importorskip("distributed")
    manifest = write_manifest(tmp_path / "m.jsonl", JOBS)
    local, dask_out = tmp_path / "local", tmp_path / "dask"
    proc = run_cli("batch", manifest, "--out", local, "--jobs", "2", "--retries", "1", timeout=120)
    assert proc.returncode == 117, proc.stderr
    with local_cluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        address = cluster.scheduler_address
        proc = dask_batch(manifest, dask_out, address, "--jobs", "2", "--retries", "1")
    assert proc.returncode == 117, proc.stderr
    ours = sorted((comparable(line, local) for line in summary(local)), key=lambda line: line["id"])
    theirs = sorted((comparable(line, dask_out) for line in summary(dask_out)), key=lambda line: line["id"])
    assert ours == theirs
    assert {line["id"]: line["exit_code"] for line in ours} == {
        "ok": 0,
        "fails": 3,
        "slow": 106,
        "absent": 101,
        "secret": 0,
    }


def test_a_killed_workers_ended_jobs_keep_the_outcome_their_streams_say(tmp_path, containment):
    """A job kills the worker it runs on after the job before it in the same task has ended: the
    task fails as a whole, but that first job's stream ends with runner_exit, so its line is the
    one its stream says (its exit 3, its capture's digest), not ``task_failed``; the killer's
    stream never ended, and it alone of its task is ``task_failed``. Two threads per worker, so
    a second task may die beside it: every job's line is true to its stream, under either
    containment."""
    pytest.importorskip("distributed")
    import dask

    from processkit.batching.ended import line_from_stream
    from processkit.batching.manifest import jobs_from
    from processkit.events.follow import read_all

    # 16 jobs over 2 workers make tasks of 2 (fleet.TASKS_PER_WORKER): the first task is
    # [before, killer], run one at a time (--jobs 1), so "before" has ended when "killer" runs.
    jobs = [{"args": ["sh", "-c", "echo before; exit 3"], "id": "before"}]
    jobs.append({"args": ["sh", "-c", "kill -9 $PPID; sleep 30"], "id": "killer"})
    jobs += [{"args": ["true"], "id": f"t{n}"} for n in range(14)]
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    out = tmp_path / "out"
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with local_cluster(n_workers=2, threads_per_worker=2, processes=True) as cluster:
            proc = dask_batch(manifest, out, cluster.scheduler_address, "--jobs", "1")
    assert proc.returncode == 117, proc.stderr
    lines = {line["id"]: line for line in summary(out)}
    assert sorted(lines) == sorted(job["id"] for job in jobs)
    before = lines["before"]
    assert (before["exit_code"], before["source"], before["child_code"]) == (3, "child_exit", 3)
    assert before["capture"]["stdout"]["sha256"] == hashlib.sha256(b"before\n").hexdigest()
    started = read_all(str(out / "before" / "events.jsonl"))[0]
    assert before["run_id"] == started.run_id and before["attempts"] == 1
    assert before["started_at"] == started.time and before["duration_ms"] is not None
    assert (lines["killer"]["exit_code"], lines["killer"]["source"]) == (None, "task_failed")
    said = proc.stderr.decode().splitlines()
    lost = sum(line["source"] == "task_failed" for line in lines.values())
    assert "batch: killer: task failed" in said, said  # named so on the terminal, not "not started"
    assert f", {lost} task failed" in said[-1] and "not started" not in said[-1], said[-1]
    assert b"(1 of them had ended: its line is read from its stream)" in proc.stderr, proc.stderr
    for key, line in lines.items():  # each line is true to its job's stream, if it has one
        stream = out / key / "events.jsonl"
        ended = read_all(str(stream)) if stream.exists() else []
        if ended and ended[-1].event == "runner_exit":
            assert line["exit_code"] == ended[-1].code, key
        else:
            assert line["source"] == "task_failed", key
    label = json.loads((out / "before" / "events.jsonl").read_text().splitlines()[0])["labels"]["batch"]
    job = jobs_from(jobs[:1])[0]
    assert line_from_stream(job, str(out), label) is not None
    assert line_from_stream(job, str(out), "another-batch") is None, "a stream of another batch is not this one's"


def test_a_halted_dask_batch_gives_every_job_one_line(tmp_path):
    """Under ``--halt-on-failure`` both recorders fill: the worker's for the rest of the failing
    job's task (halted there, before the next one starts), the client's for the tasks it
    cancelled. Every job still has exactly one line, and every one not started says halted."""
    pytest.importorskip("distributed")
    # 12 jobs over 2 workers make tasks of 2: the first is [fails, partner], run one at a time.
    jobs = [{"args": ["sh", "-c", "exit 5"], "id": "fails"}, {"args": ["true"], "id": "partner"}]
    jobs += [{"args": ["sleep", "0.2"], "id": f"s{n}"} for n in range(10)]
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    out = tmp_path / "out"
    with local_cluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        proc = dask_batch(manifest, out, cluster.scheduler_address, "--jobs", "1", "--halt-on-failure")
    assert proc.returncode == 117, proc.stderr
    written = summary(out)
    assert sorted(line["id"] for line in written) == sorted(job["id"] for job in jobs), "one line per job"
    lines = {line["id"]: line for line in written}
    assert (lines["fails"]["exit_code"], lines["partner"]["source"]) == (5, "halted")
    assert all(line["source"] == "halted" for line in written if line["exit_code"] is None)
    not_started = sum(line["exit_code"] is None for line in written)
    assert f"{not_started} not started" in proc.stderr.decode().splitlines()[-1]
