"""``batch -- CMD ::: ...`` after a stop or the halt: the template's jobs never made are read to
be recorded as not started where its outermost sources are ``:::`` arguments or regular files
(a pipe never is: its producer may never end); a template error known from argv is refused
before any job runs, a failure met past the stop does not replace the stop's outcome, and a
second stop cuts the recording short. Process-level: the real CLI, real children, synchronised
on the batch's own output and a FIFO its first job writes."""

from __future__ import annotations

import json
import os
import signal

import pytest

from conftest import run_cli, start_cli
from fifo_ends import written_into
from test_batch import summary

BATCH_FAILED = 117
CANCELLED = 107
UNLINKED = b"processkit-cli: :::+ links sources of different lengths: each value needs one partner\n"


def test_linked_arguments_of_different_lengths_are_refused_before_any_job_runs(tmp_path):
    """``::: a b c :::+ x y`` ran two jobs and then failed 100; halted, the read past the halt
    met it and its 100 replaced the halt's 117 with no closing count. Both are known from argv."""
    ran = tmp_path / "ran"
    command = ["sh", "-c", f'echo {{}} >> "{ran}"; exit 1']
    for halt in ([], ["--halt-on-failure"]):
        out = tmp_path / f"out{len(halt)}"
        proc = run_cli("batch", "--out", out, "-j", "1", *halt, "--", *command, ":::", "a", "b", "c", ":::+", "x", "y")
        assert (proc.returncode, proc.stderr) == (100, UNLINKED)
        assert not ran.exists(), ran.read_text()


def test_a_template_of_more_jobs_than_a_batch_runs_is_refused_before_any_runs(tmp_path):
    ran = tmp_path / "ran"
    words = [":::", *map(str, range(1001)), ":::", *map(str, range(1000))]
    proc = run_cli("batch", "--out", tmp_path / "out", "-j", "1", "--", "sh", "-c", f'touch "{ran}"', *words)
    assert proc.returncode == 100
    assert proc.stderr.endswith(b"give more than 1000000 jobs, the most a batch runs\n"), proc.stderr
    assert not ran.exists()


@pytest.mark.parametrize("whole", [True, False])
def test_a_template_past_the_bound_is_named_as_a_template_read_whole_or_as_it_comes(monkeypatch, whole):
    """A template read whole (``--partition``, ``--history``, Dask) past the bound said
    ``manifest line N`` where one read as it comes gave the template's message (in-process: the
    bound made small, as a million jobs would take the test's minutes)."""
    from processkit.batching import manifest
    from processkit.batching.template_flags import template_jobs
    from processkit.errors import Failure

    monkeypatch.setattr(manifest, "MAX_JOBS", 2)
    with pytest.raises(Failure) as refused:
        list(template_jobs(["echo", ":::", "a", "b", "c"], None, {}, whole=whole))
    assert refused.value.message == "the template's arguments give more than 2 jobs, the most a batch runs"


@pytest.mark.parametrize("how", ["file", "stdin", "linked"])
def test_a_halted_template_over_a_regular_file_records_the_jobs_it_never_made(tmp_path, how):
    """A regular file never makes the reader wait and ends: its unread lines are jobs not
    started, as ``:::`` arguments' are (they were left out: ``0 of 1 jobs``)."""
    lines = tmp_path / "l3.txt"
    lines.write_text("3\n0\n4\n")
    sources = {"file": ["::::", lines], "stdin": [], "linked": [":::", "3", "0", "4", "::::+", lines]}[how]
    out = tmp_path / "out"
    with open(lines, "rb") as stdin:
        proc = run_cli("batch", "--out", out, "-j", "1", "--halt-on-failure", "--id", "j{#}", "--",
                       "sh", "-c", "exit {1}", *sources, stdin=stdin)  # fmt: skip
    assert proc.returncode == BATCH_FAILED, proc.stderr
    assert proc.stderr.decode().splitlines()[-1] == (
        "batch: 0 of 3 jobs exited 0, 1 failed, 2 not started, halted by --halt-on-failure"
    )
    assert [summary(out)[job]["source"] for job in ("j1", "j2", "j3")] == ["child_exit", "halted", "halted"]


def test_a_bad_line_met_past_the_halt_leaves_the_halts_outcome(tmp_path):
    """Reading the rest after the halt meets a line past the 1 MiB bound: the halt's 117 and
    its closing count stand, the jobs past it said not recorded (that failure's 100 replaced
    them, with no page and no closing line)."""
    lines = tmp_path / "args.txt"
    lines.write_bytes(b"1\n2\n" + b"x" * (1 << 20) + b"\n3\n")
    out = tmp_path / "out"
    proc = run_cli("batch", "--out", out, "-j", "1", "--halt-on-failure", "--junit", tmp_path / "o.xml",
                   "--", "sh", "-c", "exit 1", "::::", lines)  # fmt: skip
    assert proc.returncode == BATCH_FAILED, proc.stderr
    closing = "batch: 0 of 2 jobs exited 0, 1 failed, 1 not started, halted by --halt-on-failure, the rest not recorded"
    assert proc.stderr.decode().splitlines()[-1] == closing
    assert (tmp_path / "o.xml").exists() and (out / "index.html").exists()


@pytest.mark.parametrize("manifest", [False, True])
def test_a_second_stop_cuts_the_recording_of_the_jobs_not_started_short(tmp_path, manifest):
    """100,000 jobs stopped on the first: recording the rest takes seconds, and a second
    SIGTERM then was ignored (the batch went on to its end). It now ends the recording at once:
    the stop's 107, the closing line saying the rest not recorded, for a manifest as a template."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    job = f'[ "$0" = 1_1 ] && echo up > "{fifo}"; exec sleep 60'
    if manifest:
        jobs = tmp_path / "m.jsonl"
        ids = (f"{a}_{b}" for a in range(1, 1001) for b in range(1, 101))
        jobs.write_text("".join(json.dumps({"id": i, "args": ["sh", "-c", job, i]}) + "\n" for i in ids))
        words = [jobs]
    else:
        words = ["--", "sh", "-c", job, "{1}_{2}", ":::", *map(str, range(1, 1001)), ":::", *map(str, range(1, 101))]
    batch = start_cli("batch", "--out", tmp_path / "out", "-j", "1", *words)
    try:
        assert written_into(fifo, what="the first job's start") == b"up\n"
        batch.send_signal(signal.SIGTERM)
        said = []
        for line in batch.stderr:
            said.append(line)
            if line.endswith(b": not started, cancelled by SIGTERM\n"):  # recording the rest: stopped again
                batch.send_signal(signal.SIGTERM)
                break
        said += batch.stderr.readlines()
        assert batch.wait(timeout=60) == CANCELLED
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()
    recorded = sum(line.endswith(b": not started, cancelled by SIGTERM\n") for line in said)
    assert 0 < recorded < 99_999
    assert said[-1].decode().endswith(", cancelled by SIGTERM, the rest not recorded\n"), said[-3:]


@pytest.mark.parametrize(
    "key,said",
    [("id", "job 3: duplicate id 'a' (first as job 1)"), ("run_id", "job 3: duplicate run_id 'r' (first as job 1)")],
)
def test_a_templates_duplicate_id_or_run_id_is_named_as_its_job(key, said):
    """A template's jobs checked whole named a duplicate ``manifest line N`` (first on line M),
    though a template has no lines (in-process: ``safe_id`` numbers a template's ids apart, so
    only the check itself, given a template's jobs, meets one)."""
    from processkit.batching import manifest
    from processkit.errors import Failure

    ids = ("a", "b", "a") if key == "id" else ("a", "b", "c")
    jobs = [{"args": ["true"], "id": name} for name in ids]
    if key == "run_id":
        for job, run_id in zip(jobs, ("r", "s", "r")):
            job["run_id"] = run_id
    with pytest.raises(Failure) as refused:
        manifest.jobs_from(jobs, manifest.JOB)
    assert refused.value.message == said
    with pytest.raises(Failure) as as_lines:
        manifest.jobs_from(jobs)
    assert as_lines.value.message == said.replace("job 3", "manifest line 3").replace("as job", "on line")
