"""A ``--dask-scheduler`` batch whose tasks Dask itself ends: a worker lost under its task past the
scheduler's ``allowed-failures``, the cluster restarted. Each job's line, the JUnit and the closing
line say what happened to its task, so a farm user sees why the shard failed. Real
``LocalCluster``s, the real ``processkit-cli``."""

from __future__ import annotations

import json
import os
import signal

import pytest

from conftest import SAFETY_NET, pid_alive, run_cli, start_cli
from local_cluster import held_job, job_pids, local_cluster
from streams import wait_until

distributed = pytest.importorskip("distributed")


def _batch(tmp_path, jobs: list[dict], cluster, then) -> tuple[dict[str, dict], str, str]:
    """``jobs`` run on ``cluster`` (``--jobs 2``, a JUnit report); once two of them began (the
    worker's threads'), ``then()``. The lines by id, the batch's stderr, and the JUnit; no job left
    running."""
    manifest, out, junit, began = tmp_path / "m.jsonl", tmp_path / "out", tmp_path / "junit.xml", tmp_path / "began"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    batch = start_cli(
        "batch", manifest, "--out", out, "--jobs", 2, "--junit", junit,
        "--dask-scheduler", cluster.scheduler_address, cwd=tmp_path,
    )  # fmt: skip
    try:
        begun = lambda: [name for name in os.listdir(began) if not name.endswith(".new")]  # noqa: E731
        ran = [job_pids(began, name)[1] for name in wait_until(lambda: len(begun()) == 2 and begun(), what="two jobs")]
        then()
        _, err = batch.communicate(timeout=SAFETY_NET)
    finally:
        batch.kill()
    assert batch.returncode == 117, err
    wait_until(lambda: not any(map(pid_alive, ran)), what="the jobs ending")
    assert run_cli("prune").returncode == 0  # what the lost workers' batch engines left
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    return lines, err.decode(), junit.read_text()


def test_a_restarted_cluster_s_tasks_are_recorded_failed_and_why_not_halted(tmp_path):
    """The cluster restarted (``client.restart``, its workers with it) while two jobs ran: Dask
    cancels the batch's tasks. Each job was recorded ``halted`` ("not started, halted by
    --halt-on-failure", with no ``--halt-on-failure`` given), though two had run, and nothing said
    why. Now each task failed, its lines, the JUnit and one warning saying Dask cancelled it."""
    began = tmp_path / "began"
    began.mkdir()
    jobs = [held_job(began, f"j{n}") for n in range(4)]
    with local_cluster(n_workers=1, threads_per_worker=2, processes=True) as cluster:

        def restart() -> None:
            with distributed.Client(cluster.scheduler_address) as client:
                client.restart()

        lines, err, junit = _batch(tmp_path, jobs, cluster, restart)
    why = (
        "its Dask task failed: cancelled by Dask (scheduler-restart: Scheduler has restarted. Please re-run your work.)"
    )
    assert {(line["source"], line["message"]) for line in lines.values()} == {("task_failed", why)}, lines
    assert "halted" not in err and err.count("scheduler-restart") == 1, err
    assert "4 Dask tasks of 4 jobs failed: cancelled by Dask (scheduler-restart" in err, err
    assert junit.count('type="task_failed"') == 4 and "scheduler-restart" in junit, junit


def test_a_task_whose_worker_was_killed_says_the_worker_was_lost(tmp_path):
    """A worker killed under its task (``allowed-failures`` 0: the task is not run again): its
    jobs' lines said Dask's own paragraph cut at 256 characters ("Attempted to run task
    'run_chunk-...' on 1 different workers, ... a good next ..."). They say the worker was lost,
    and which."""
    import dask

    began = tmp_path / "began"
    began.mkdir()
    jobs = [held_job(began, "victim"), held_job(began, "other")]
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        local_cluster(n_workers=2, threads_per_worker=1, processes=True) as cluster,
    ):
        with distributed.Client(cluster.scheduler_address) as client:
            workers = {pid: address for address, pid in client.run(os.getpid).items()}

        def kill() -> None:
            for id in ("victim", "other"):
                os.kill(job_pids(began, id)[0], signal.SIGKILL)

        lines, err, junit = _batch(tmp_path, jobs, cluster, kill)
    for id in ("victim", "other"):
        address = workers[job_pids(began, id)[0]]
        why = f"its Dask task failed: its Dask worker was lost ({address}; 1 worker lost under it, past the scheduler's allowed-failures 0)"
        assert (lines[id]["source"], lines[id]["message"]) == ("task_failed", why), lines[id]
        assert f"a Dask task of 1 job failed: its Dask worker was lost ({address};" in err, err
        assert why in junit
