"""``wait`` on a live batch, as the reference's reader sees it: the batch's own registry record
(its ``run_id`` the ``batch`` label each job carries) is a live run until the batch ends. This
build reads the jobs' records in its place, and ``wait --run-id LABEL`` said the batch was over
at once (exit 0, ``unknown``) while it ran, and ``wait --all`` took only the jobs live at its
first look, so a CI step waiting for a batch went on while the batch still started jobs. Now
both wait for the batch's record too."""

from __future__ import annotations

import json
from contextlib import ExitStack

from conftest import SAFETY_NET, reaped, run_cli, start_cli, wait_for_event
from control_support import start_waiter

WAIT_TIMEOUT = 112
AMBIGUOUS = 103


def held_until(release) -> list[str]:
    """A job's command that ends once the file ``release`` exists."""
    return ["sh", "-c", until(release)]


def until(release) -> str:
    return f"while [ ! -e {release} ]; do sleep 0.01; done"


def test_wait_waits_for_a_live_batch_by_its_label(tmp_path):
    release = tmp_path / "release"
    out = tmp_path / "out"
    manifest = tmp_path / "m.jsonl"
    jobs = [{"id": "held", "args": held_until(release)}, {"id": "later", "args": ["true"]}]
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    with ExitStack() as ours:  # a step failed: what it started, killed by handle
        batch = ours.enter_context(reaped(start_cli("batch", manifest, "--out", out, "--jobs", "1", cwd=tmp_path)))
        label = wait_for_event(out / "held" / "events.jsonl", "run_started")["labels"]["batch"]
        waiter = ours.enter_context(
            reaped(start_waiter("--all", "--label", f"batch={label}", "--report-outcome", cwd=tmp_path))
        )
        by_id = run_cli("wait", "--run-id", label, "--timeout", "1s", cwd=tmp_path)  # the batch still lives
        assert by_id.returncode == WAIT_TIMEOUT, by_id.stderr
        release.touch()
        reported, err = waiter.communicate(timeout=SAFETY_NET)
        assert waiter.returncode == 0, err
        batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == 0
    assert label in [entry["run_id"] for entry in json.loads(reported)], "the batch's own record was waited for"
    ended = run_cli("wait", "--run-id", label, "--report-outcome", cwd=tmp_path)
    assert ended.returncode == 0 and json.loads(ended.stdout)["status"] == "unknown"  # no stream of its own


def test_wait_takes_a_dask_batchs_chunks_as_one_batch(tmp_path):
    """Each chunk of a ``--dask-scheduler`` batch lodges its jobs and leaves a record of its own,
    all under the batch's label: ``wait --run-id LABEL`` said "ambiguous run id — 2 live runs"
    (103) instead of waiting for the batch."""
    from local_cluster import held_job, job_pids, local_cluster

    began, out, manifest = tmp_path / "began", tmp_path / "out", tmp_path / "m.jsonl"
    began.mkdir()
    jobs = [held_job(began, name, then=until(tmp_path / "release")) for name in ("one", "two")]
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    with ExitStack() as ours:  # a step failed: what it started, killed by handle
        cluster = ours.enter_context(local_cluster(n_workers=2, threads_per_worker=1, processes=True))
        address = cluster.scheduler_address
        batch = ours.enter_context(
            reaped(start_cli("batch", manifest, "--out", out, "--dask-scheduler", address, cwd=tmp_path))
        )
        workers = {job_pids(began, name)[0] for name in ("one", "two")}  # both chunks lodged, each its own
        assert len(workers) == 2
        label = wait_for_event(out / "one" / "events.jsonl", "run_started")["labels"]["batch"]
        by_id = run_cli("wait", "--run-id", label, "--timeout", "1s", cwd=tmp_path)
        assert by_id.returncode == WAIT_TIMEOUT, by_id.stderr
        waiter = ours.enter_context(reaped(start_waiter("--run-id", label, cwd=tmp_path)))
        (tmp_path / "release").touch()
        _, err = waiter.communicate(timeout=SAFETY_NET)
        assert waiter.returncode == 0, err
        batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == 0


def test_a_run_given_a_live_batchs_label_is_still_ambiguous(tmp_path):
    """Only a batch's own records are one batch: a run of its own given the label is another."""
    release = tmp_path / "release"
    out, manifest = tmp_path / "out", tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "held", "args": held_until(release)}) + "\n")
    with ExitStack() as ours:  # a step failed: what it started, killed by handle
        batch = ours.enter_context(reaped(start_cli("batch", manifest, "--out", out, cwd=tmp_path)))
        label = wait_for_event(out / "held" / "events.jsonl", "run_started")["labels"]["batch"]
        run = ["run", "--run-id", label, "--jsonl", tmp_path / "run.jsonl", "--", *held_until(release)]
        runner = ours.enter_context(reaped(start_cli(*run, cwd=tmp_path)))
        wait_for_event(tmp_path / "run.jsonl", "run_started")
        by_id = run_cli("wait", "--run-id", label, "--timeout", "1s", cwd=tmp_path)
        release.touch()
        for process in (batch, runner):
            process.communicate(timeout=SAFETY_NET)
    assert (batch.returncode, runner.returncode) == (0, 0)
    assert by_id.returncode == AMBIGUOUS, by_id.stderr
    assert b"2 live runs" in by_id.stderr
