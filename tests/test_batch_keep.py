"""``batch --keep failed``: a passing job leaves only its summary line; a failed one's stream and
capture are in ``--out`` as ``--keep all`` writes them. Process-level: the real CLI, real children."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from conftest import run_cli
from test_batch import summary, write_manifest
from streams import check_stream, one

BATCH_FAILED, USAGE = 117, 100


def test_keep_failed_writes_only_the_failed_jobs_files_and_every_line_keeps_its_digests(tmp_path):
    jobs = [
        {"args": ["sh", "-c", "echo passing; echo note >&2"], "id": "ok"},
        {"args": ["sh", "-c", "echo out; echo 'error: broken' >&2; exit 3"], "id": "bad"},
        {
            "args": ["sh", "-c", "test -e marker || { touch marker; exit 1; }; echo second"],
            "id": "flaky",
            "cwd": str(tmp_path),
        },
        {"args": ["seq", "1", "100000"], "id": "ring", "capture_max_bytes": 1024, "capture_keep": "tail"},
    ]
    out = tmp_path / "out"
    proc = run_cli(
        "batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--keep", "failed", "--retries", "1"
    )
    assert proc.returncode == BATCH_FAILED, proc.stderr
    lines = summary(out)
    assert sorted(os.listdir(out)) == [".batch-lock", "bad", "flaky", "index.html", "ring", "summary.jsonl"]
    ok = lines["ok"]["capture"]
    assert ok["stdout"]["path"] is None and ok["stderr"]["path"] is None, "no file is named: none was written"
    assert ok["stdout"]["sha256"] == hashlib.sha256(b"passing\n").hexdigest() and ok["stdout"]["bytes"] == 8
    assert ok["stderr"]["sha256"] == hashlib.sha256(b"note\n").hexdigest()
    # the failed job: its stream valid and whole, its capture where the line says, digests equal
    events = check_stream(out / "bad" / "events.jsonl", 3)
    captured = one(events, "output_captured")
    assert lines["bad"]["capture"] == {"stdout": captured["stdout"], "stderr": captured["stderr"]}
    for name, data in (("stdout", b"out\n"), ("stderr", b"error: broken\n")):
        path = lines["bad"]["capture"][name]["path"]
        assert path == str(out / "bad" / "capture" / f"{name}.log")
        assert (out / "bad" / "capture" / f"{name}.log").read_bytes() == data
        assert lines["bad"]["capture"][name]["sha256"] == hashlib.sha256(data).hexdigest()
    assert "    | error: broken" in proc.stderr.decode()
    # a retried job: the failed attempt kept in attempt-1/, the passing one's files dropped
    assert lines["flaky"]["exit_code"] == 0 and lines["flaky"]["attempts"] == 2
    assert sorted(os.listdir(out / "flaky")) == ["attempt-1"]
    check_stream(out / "flaky" / "attempt-1" / "events.jsonl", 1)
    assert lines["flaky"]["capture"]["stdout"]["path"] is None
    # a ring capture is put in order in its file, so it is written in place as always
    assert (out / "ring" / "capture" / "stdout.log").read_bytes().endswith(b"99999\n100000\n")
    page = (out / "index.html").read_text()
    assert "bad" in page and "error: broken" in page


def test_keep_all_is_the_default_and_a_bad_keep_is_a_usage_error(tmp_path):
    manifest = write_manifest(tmp_path / "m.jsonl", [{"args": ["true"], "id": "ok"}])
    out = tmp_path / "out"
    assert run_cli("batch", manifest, "--out", out, "--keep", "all").returncode == 0
    assert (out / "ok" / "events.jsonl").is_file()
    proc = run_cli("batch", manifest, "--out", tmp_path / "other", "--keep", "passed")
    assert proc.returncode == USAGE, proc.stderr
    assert b"invalid value 'passed' for '--keep <all|failed>': expected all or failed" in proc.stderr
    assert not (tmp_path / "other").exists()


def test_a_job_that_passes_on_resume_leaves_no_earlier_failure_behind(tmp_path):
    """The earlier batch's failed stream and capture would contradict the line saying the job
    now passed: they go, as --keep all would have overwritten them."""
    jobs = [{"args": ["sh", "-c", "test -e marker || { touch marker; exit 1; }"], "id": "flaky", "cwd": str(tmp_path)}]
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    out = tmp_path / "out"
    assert run_cli("batch", manifest, "--out", out, "--keep", "failed").returncode == BATCH_FAILED
    assert (out / "flaky" / "events.jsonl").is_file()
    proc = run_cli("batch", manifest, "--out", out, "--keep", "failed", "--resume")
    assert proc.returncode == 0, proc.stderr
    assert not (out / "flaky").exists()
    assert json.loads((out / "summary.jsonl").read_text().splitlines()[-1])["exit_code"] == 0


@pytest.mark.parametrize("earlier_files", [False, True])
def test_a_passing_held_job_looks_for_earlier_files_only_where_out_held_something(tmp_path, earlier_files):
    """Into an ``--out`` that was empty when the batch began no passing job can have files from
    before, so none is looked for (no ``unlink`` a job); otherwise they go."""
    from processkit.batching.held import HeldFiles, settle

    job = tmp_path / "out" / "job"
    (job / "capture").mkdir(parents=True)
    (job / "events.jsonl").write_text("{}\n")
    (job / "capture" / "stdout.log").write_text("old\n")
    held = HeldFiles()
    try:
        assert settle(held, False, str(job / "events.jsonl"), str(job / "capture"), earlier_files) is False
    finally:
        held.close()
    assert job.exists() is not earlier_files


def test_an_attempt_that_is_over_hands_its_memfds_to_the_next_emptied(tmp_path, monkeypatch):
    """``--keep failed`` makes one set of three memfds per job in flight, not per job: an attempt
    that is over hands its set to the next one, truncated and rewound, so each failed job's
    files hold its own bytes alone, whatever the attempt before wrote into the same memfds."""
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings, run_batch

    made: list[str] = []
    real = os.memfd_create
    monkeypatch.setattr(os, "memfd_create", lambda name, flags=0: made.append(name) or real(name, flags))
    jobs = [
        {"args": ["sh", "-c", "seq 1 20000; seq 1 5000 >&2; exit 1"], "id": "long"},
        {"args": ["sh", "-c", "echo short; exit 2"], "id": "short"},
        {"args": ["sh", "-c", "echo passing; echo note >&2"], "id": "ok"},
        {"args": ["sh", "-c", "printf x >&2; exit 3"], "id": "last"},
    ]
    out = tmp_path / "out"
    lines, _ = run_batch(jobs_from(jobs), Settings(str(out), 1, keep_failed_only=True), signals=False)
    assert made == ["events.jsonl", "stdout.log", "stderr.log"], "one set, for the one job in flight"
    assert [line.exit_code for line in lines] == [1, 2, 0, 3]
    kept = {
        "long": (b"".join(b"%d\n" % n for n in range(1, 20001)), b"".join(b"%d\n" % n for n in range(1, 5001))),
        "short": (b"short\n", b""),
        "last": (b"", b"x"),
    }
    for line in lines:
        if line.id not in kept:
            assert not (out / line.id).exists()
            continue
        events = check_stream(out / line.id / "events.jsonl", line.exit_code)
        assert one(events, "run_started")["run_id"] == line.run_id, "the stream is this job's alone"
        for name, data in zip(("stdout", "stderr"), kept[line.id]):
            assert (out / line.id / "capture" / f"{name}.log").read_bytes() == data
            assert getattr(line, name).sha256 == hashlib.sha256(data).hexdigest()


def test_only_an_empty_out_counts_as_fresh(tmp_path):
    from processkit.batching.outdir import prepare_out

    assert prepare_out(str(tmp_path / "made")) is True
    assert prepare_out(str(tmp_path / "made")) is True, "still empty"
    (tmp_path / "made" / "summary.jsonl").write_text("")
    assert prepare_out(str(tmp_path / "made")) is False
