"""A Dask task run again (its worker lost or retired under it): its jobs may have run twice, and a
warning names those its earlier run began, whatever that run left on the shared ``--out`` (a
stream with its ``run_started``, one without, or none: ``--keep failed``). Real ``LocalCluster``s."""

from __future__ import annotations

import json
import os

import pytest

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_file
from local_cluster import batch_on_cluster, local_cluster

SAID = (
    b"warning: Dask ran a task again (its worker lost or retired, or its result lost) after 1 of its jobs had begun "
    b"(deploy): it may have run more than once, and its line is the last run's"
)


def _deploy_run_twice(tmp_path, first: str):
    """A manifest of one job, ``deploy``, whose first run touches a marker then runs ``first``,
    and whose next prints ``second``; and the marker."""
    marker = tmp_path / "first-run"
    once = f"if [ ! -e {marker} ]; then touch {marker}; {first}; fi; echo second"
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"args": ["sh", "-c", once], "id": "deploy"}) + "\n")
    return manifest, marker


@pytest.mark.parametrize("stream_emptied", [False, True], ids=["after-run-started", "before-run-started"])
def test_a_dask_task_run_again_after_its_worker_died_is_said(tmp_path, stream_emptied):
    """Dask runs a task again when its worker dies under it (``allowed-failures``, 3 by
    default): the job ran twice, its line shows the last run alone. A warning names it. A worker
    lost between the job's spawn and its ``run_started`` leaves a stream without one, which the
    rerun's look at the streams took for a job not begun: the first run here empties its own
    stream before it kills its worker (``stream_emptied``), which leaves ``--out`` as that loss
    does, deterministically."""
    pytest.importorskip("distributed")

    empty = f": > {tmp_path / 'out' / 'deploy' / 'events.jsonl'}; " if stream_emptied else ""
    manifest, marker = _deploy_run_twice(tmp_path, f"{empty}kill -9 $PPID; sleep 30")
    out = tmp_path / "out"
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        proc = run_cli("batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists() and (out / "deploy" / "capture" / "stdout.log").read_bytes() == b"second\n"
    assert SAID in proc.stderr, proc.stderr
    assert run_cli("prune").returncode == 0  # what the killed worker's batch engine left


def test_a_dask_task_run_again_after_its_worker_retired_is_said(tmp_path):
    """A worker retired gracefully (adaptive scale-down, ``retire_workers``) under a running task:
    the scheduler runs the task elsewhere and counts no lost worker, so a check of that count said
    nothing. The task's second run finds the first's record of the jobs it began, and says it.
    Under ``--keep all`` (the default), where the job's capture files are on ``--out`` while the first run still
    writes them: the batch guards its ``--out``, so the second run takes no lock of its own on
    them (a run's capture lock refused it, 111, and the batch ended 117)."""
    distributed = pytest.importorskip("distributed")

    manifest, began = _deploy_run_twice(tmp_path, "sleep 60.0713")
    out = tmp_path / "out"
    with local_cluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        batch = start_cli("batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address)
        try:
            with distributed.Client(cluster.scheduler_address) as client:
                wait_for_file(began)
                running = [worker for worker, keys in client.processing().items() if keys]
                assert len(running) == 1, running
                client.retire_workers(running)
            _, err = batch.communicate(timeout=2 * SAFETY_NET)
        finally:
            batch.kill()
    assert batch.returncode == 0, err
    assert (out / "deploy" / "capture" / "stdout.log").read_bytes() == b"second\n"
    assert b"warning: Dask ran a task again (its worker lost or retired, or its result lost) after 1 of its" in err
    assert run_cli("prune").returncode == 0  # the first run, which the retired worker left


def test_a_dask_task_run_again_under_keep_failed_is_said(tmp_path):
    """Under ``--keep failed`` a running job's stream is held in the worker's memory: the worker
    killed under it left nothing in ``--out``, so the second run found no stream and said
    nothing. The task's record of the jobs it began says it; it is gone once the batch is over,
    and the passing job still leaves no files."""
    pytest.importorskip("distributed")

    manifest, marker = _deploy_run_twice(tmp_path, "kill -9 $PPID; sleep 30")
    out = tmp_path / "out"
    proc = batch_on_cluster(manifest, out, "--keep", "failed")
    assert proc.returncode == 0, proc.stderr
    assert marker.exists() and SAID in proc.stderr, proc.stderr
    assert sorted(path.name for path in out.iterdir()) == [".batch-lock", "index.html", "summary.jsonl"]
    assert run_cli("prune").returncode == 0  # what the killed worker's batch engine left


def _run_of_the_task(out, label: str, jobs, begins) -> list[str]:
    """One run of a task as ``chunk.run_chunk`` makes it: what an earlier run began, read, then
    the record opened and ``begins`` marked."""
    from processkit.batching import began

    again = began.earlier(str(out), label, jobs)
    record = began.Record(str(out), label, jobs, again)
    try:
        for job in begins:
            record.mark(job)
    finally:
        record.close()
    return again


def test_two_dask_batches_sharing_an_out_keep_their_records_apart(tmp_path):
    """Two Dask batches in one ``--out`` kept their records under the same names: the second's
    first task truncated the first's record of the same first job, and the first batch's end
    removed the second's records with its own, so a task of either run again named nothing."""
    from processkit.batching import began
    from processkit.batching.manifest import jobs_from

    jobs = jobs_from([{"args": ["true"], "id": "x"}, {"args": ["true"], "id": "y"}])
    out = tmp_path / "out"
    _run_of_the_task(out, "batch-a", jobs, jobs[:1])
    _run_of_the_task(out, "batch-b", jobs, jobs)
    assert began.earlier(str(out), "batch-a", jobs) == ["x"]
    began.forget(str(out), "batch-b")
    assert began.earlier(str(out), "batch-a", jobs) == ["x"]
    assert began.earlier(str(out), "batch-b", jobs) == []
    began.forget(str(out), "batch-a")
    assert sorted(path.name for path in out.iterdir()) == []


def test_a_dask_task_run_many_times_still_names_each_job_it_began(tmp_path):
    """Each run of a task marked every job it began, again: the record grew by a run's worth each
    time, and the bounded read of it (two runs' worth) cut the ids a later run had added: the
    sixth run here did not name ``y``, begun by the fifth. A run marks only the ids not there."""
    from processkit.batching.manifest import jobs_from

    jobs = jobs_from([{"args": ["true"], "id": name * 128} for name in "xy"])
    out = tmp_path / "out"
    for _ in range(4):
        _run_of_the_task(out, "batch-a", jobs, jobs[:1])  # lost before ``y`` began
    _run_of_the_task(out, "batch-a", jobs, jobs)
    assert _run_of_the_task(out, "batch-a", jobs, []) == ["x" * 128, "y" * 128]


def test_a_record_with_long_run_ids_and_counts_from_each_run_is_read_whole(tmp_path, capfd):
    """The record's read budget took a run id for at most 128 bytes and one count line per job, so
    a 256-character run id (1,024 bytes in UTF-8) and a second run's count line pushed the later
    lines past it, dropped without a word: the third run named no ``y``, begun by the second, and
    the second run's count, the one its line is read back with, was lost."""
    from types import SimpleNamespace

    from processkit.batching import began
    from processkit.batching.manifest import jobs_from

    jobs = jobs_from([{"args": ["true"], "id": name * 128} for name in "xy"])
    out, label = str(tmp_path / "out"), "batch-a"
    first, second = "\U0001f600" * 256, "\U0001f600" * 255 + "2"
    for run_id, count, begins in ((first, 1, jobs[:1]), (second, 2, jobs)):
        record = began.Record(out, label, jobs, began.earlier(out, label, jobs))
        try:
            for job in begins:
                record.mark(job)
            record.ended(SimpleNamespace(id=jobs[0].id, oom_kills=count, run_id=run_id))
        finally:
            record.close()
    assert began.earlier(out, label, jobs) == ["x" * 128, "y" * 128]
    assert began.oom_kills(out, label, jobs) == {first: 1, second: 2}
    assert capfd.readouterr().err == ""


def test_a_record_past_its_bound_is_said_and_its_start_still_read(tmp_path, capfd):
    """A task run again more often than the record's bound allows for (16 runs' count lines per
    job) has its later lines unread, and says so, never silently; the marks before them stand."""
    from types import SimpleNamespace

    from processkit.batching import began
    from processkit.batching.manifest import jobs_from

    jobs = jobs_from([{"args": ["true"], "id": "x"}])
    out, label = str(tmp_path / "out"), "batch-a"
    record = began.Record(out, label, jobs, [])
    try:
        record.mark(jobs[0])
        for run in range(40):
            record.ended(SimpleNamespace(id="x", oom_kills=1, run_id=f"{run:02}" + "\U0001f600" * 254))
    finally:
        record.close()
    assert began.earlier(out, label, jobs) == ["x"]
    said = capfd.readouterr().err
    assert "its lines past them are not read (its task ran again too often)" in said, said


def test_a_record_that_cannot_be_written_is_said_and_the_job_still_begins(tmp_path, capfd):
    """The record only serves the rerun's warning, yet a write to it that failed (a full disk on
    the shared ``--out``) raised the setup failure that made the job an internal failure, never
    spawned. Now it is said once and the jobs begin."""
    from processkit.batching import began
    from processkit.batching.manifest import jobs_from

    jobs = jobs_from([{"args": ["true"], "id": "x"}, {"args": ["true"], "id": "y"}])
    record = began.Record(str(tmp_path / "out"), "batch-full", jobs, [])
    os.close(record.fd)
    record.fd = os.open("/dev/full", os.O_WRONLY)
    try:
        for job in jobs:
            record.mark(job)  # neither raises
    finally:
        record.close()
    said = capfd.readouterr().err
    assert said.count("a rerun of this Dask task may go unsaid") == 1 and "No space left on device" in said, said


def test_a_task_back_before_its_worker_died_does_not_run_again(tmp_path):
    """The client held every task's future until the batch was over, so Dask kept each finished
    task's result on its worker as wanted: a worker lost later (``later`` kills it, once the
    client has ``once``'s line) lost those results, and Dask ran their tasks again, their jobs a
    second time, for a batch that had recorded them and never took the second run's lines. A
    task's future is let go once its lines are recorded. One thread: Dask begins the lost tasks
    again in their order, ``once``'s before ``later``'s second run."""
    pytest.importorskip("distributed")

    out, runs, marker = tmp_path / "out", tmp_path / "once-runs", tmp_path / "killed"
    back = f'until grep -q \'"id":"once"\' {out / "summary.jsonl"} 2>/dev/null; do sleep 0.01; done'
    later = f"if [ ! -e {marker} ]; then touch {marker}; {back}; kill -9 $PPID; sleep 30; fi"
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        json.dumps({"args": ["sh", "-c", f"echo ran >> {runs}"], "id": "once"})
        + "\n"
        + json.dumps({"args": ["sh", "-c", later], "id": "later", "timeout": 100})
        + "\n"
    )
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        proc = run_cli("batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists() and b"after 1 of its jobs had begun (later)" in proc.stderr, proc.stderr
    assert runs.read_text() == "ran\n", "a job whose line was recorded ran again"
    assert run_cli("prune").returncode == 0  # what the killed worker's batch engine left
