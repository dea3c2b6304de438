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
from test_batch import summary

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
    lines = summary(out)
    return lines, err.decode(), junit.read_text()


def _cancelled(tmp_path, count: int, then) -> tuple[dict[str, dict], str, str]:
    """``count`` held jobs on one two-thread worker (``_batch``), ``then(client)`` by another
    client once two began (it cancels the batch's tasks)."""
    began = tmp_path / "began"
    began.mkdir()
    jobs = [held_job(began, f"j{n}") for n in range(count)]
    with local_cluster(n_workers=1, threads_per_worker=2, processes=True) as cluster:

        def by_another_client() -> None:
            with distributed.Client(cluster.scheduler_address) as client:
                then(client)

        return _batch(tmp_path, jobs, cluster, by_another_client)


def test_a_restarted_cluster_s_tasks_are_recorded_failed_and_why_not_halted(tmp_path):
    """The cluster restarted (``client.restart``, its workers with it) while two jobs ran: Dask
    cancels the batch's tasks. Each job was recorded ``halted`` ("not started, halted by
    --halt-on-failure", with no ``--halt-on-failure`` given), though two had run, and nothing said
    why. Now each task failed, its lines, the JUnit and one warning saying Dask cancelled it."""
    lines, err, junit = _cancelled(tmp_path, 4, lambda client: client.restart())
    why = (
        "its Dask task failed: cancelled by Dask (scheduler-restart: Scheduler has restarted. Please re-run your work.)"
    )
    assert {(line["source"], line["message"]) for line in lines.values()} == {("task_failed", why)}, lines
    heading = "batch: 4 Dask tasks failed (their jobs may have run, and may be running still):\n"
    assert "halted" not in err and err.split(heading)[0].count("scheduler-restart") == 1, err  # one warning
    block = err.split(heading)[1]  # each named, the reason once
    assert block.count("scheduler-restart") == 1 and block.count("| (as above)") == 3, err
    assert "4 Dask tasks of 4 jobs failed: cancelled by Dask (scheduler-restart" in err, err
    assert junit.count('type="task_failed"') == 4 and "scheduler-restart" in junit, junit


def test_a_task_another_client_cancelled_with_no_reason_says_only_that_dask_cancelled_it(tmp_path):
    """Another client's forced cancel, given no reason: Dask's own stand-in for one, ``unknown``,
    was said as the reason (``cancelled by Dask (unknown)``). It says Dask cancelled the task."""

    def cancel(client) -> None:
        keys = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.tasks))
        client.cancel([distributed.Future(key, client) for key in keys], force=True)

    lines, err, junit = _cancelled(tmp_path, 2, cancel)
    why = "its Dask task failed: cancelled by Dask"
    assert {(line["source"], line["message"]) for line in lines.values()} == {("task_failed", why)}, lines
    assert "2 Dask tasks of 2 jobs failed: cancelled by Dask\n" in err and "unknown" not in err, err


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
        # named at the end with the reason, as a failed job is: the closing count alone named no job
        assert f"  {id}: task failed\n    | {why}\n" in err.split("may be running still):\n")[1], err


def test_the_json_envelope_names_a_job_lost_with_its_task_and_why(tmp_path):
    """``--error-format json``, whose envelope is all a reader gets of stderr (no warning): a job
    whose worker was killed under it said ``0 of 1 job exited 0, 1 task failed``, no job named, no
    reason, where a failed job is named with its exit. It names the job, why, and the summary."""
    import dask

    began = tmp_path / "began"
    began.mkdir()
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out"
    manifest.write_text(json.dumps(held_job(began, "lost")) + "\n")
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster,
    ):
        batch = start_cli(
            "--error-format", "json", "batch", manifest, "--out", out,
            "--dask-scheduler", cluster.scheduler_address, cwd=tmp_path,
        )  # fmt: skip
        try:
            worker, job = job_pids(began, "lost")
            os.kill(worker, signal.SIGKILL)
            _, err = batch.communicate(timeout=SAFETY_NET)
        finally:
            batch.kill()
    wait_until(lambda: not pid_alive(job), what="the job ending with its worker")
    assert run_cli("prune").returncode == 0
    assert batch.returncode == 117, err
    envelope = json.loads(err)
    line = summary(out)["lost"]
    assert line["source"] == "task_failed" and line["message"].startswith("its Dask task failed: its Dask worker"), line
    assert envelope["message"] == (
        f"0 of 1 job exited 0, 1 task failed; task failed lost: task failed ({line['message']}); "
        f"see {out}/summary.jsonl"
    ), envelope


def test_a_batch_whose_only_worker_was_lost_says_so_and_ends_by_a_stop(tmp_path):
    """The cluster's only worker (no nanny to start it again) killed under a running job: Dask
    keeps the task for a worker that joins, and the batch waited without a word. One line, once, says
    the cluster has no worker (asked here each 0.2 s); a stop signal then ends the batch (its wait for the
    tasks cut to nothing here), and the job that ran is ``task_failed``, its task not back, never
    "not started"."""
    import subprocess
    import sys

    began = tmp_path / "began"
    began.mkdir()
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out"
    manifest.write_text(json.dumps(held_job(began, "only")) + "\n")
    quick = ("processkit.batching.dask_client", "NO_WORKER_S", "0.2", "processkit.batching.fleet", "WIND_DOWN_S", "0")
    with local_cluster(n_workers=0, processes=True) as cluster:
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address, "--no-nanny"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            batch = start_cli(
                "batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address, patched=quick, cwd=tmp_path,
                bufsize=0,  # unbuffered: a line select() sees is never one a buffer took already
            )  # fmt: skip
            try:
                pid, job = job_pids(began, "only")
                assert pid == worker.pid
                worker.kill()
                worker.wait()
                said = wait_until(lambda: _line(batch, "has no worker"), what="the lost worker said")
                batch.send_signal(signal.SIGTERM)
                _, err = batch.communicate(timeout=SAFETY_NET)
            finally:
                batch.kill()
        finally:
            worker.kill()
            worker.wait()
    assert (
        said
        == "processkit-cli: warning: the Dask cluster has no worker for the batch's 1 task still out (Dask runs them once a worker joins; a stop signal ends the batch)"
    )
    assert batch.returncode == 107, err
    assert b"has no worker" not in err, err  # said once
    wait_until(lambda: not pid_alive(job), what="the job ending with its worker")
    assert run_cli("prune").returncode == 0
    line = json.loads((out / "summary.jsonl").read_text())
    assert (line["source"], line["message"]) == ("task_failed", "its Dask task did not come back"), line


def _line(process, words: str) -> str | None:
    """The next line of ``process``'s stderr, when one is there to read, if it holds ``words``."""
    import select

    if not select.select([process.stderr], [], [], 0.01)[0]:
        return None
    line = process.stderr.readline().decode().rstrip("\n")
    return line if words in line else None


def test_no_worker_is_said_at_two_empty_asks_and_again_once_workers_were_seen(tmp_path, monkeypatch):
    """The only worker (no nanny) killed under its job, a worker joining that runs the task again,
    and that one killed too. The line was said at the first ask that found no worker (a worker
    still starting, a nanny's restart gap), then never again: the second loss was silent. It is
    said after two empty asks in a row, and again once workers were seen and lost again."""
    import subprocess
    import sys

    from local_cluster import run_on_dask_beside, stop_this_client
    from processkit.batching import dask_client, fleet
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings

    began = tmp_path / "began"
    began.mkdir()
    asks: list[int] = []  # the workers each ask found
    said: list[list[int]] = []  # the asks made when each line was said
    workers: list[subprocess.Popen] = []
    jobs: list[int] = []

    def worker(address: str) -> subprocess.Popen:
        command = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-nanny", "--nthreads", "1"]
        workers.append(subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return workers[-1]

    def lose_it_twice(address: str) -> None:
        for time in (1, 2):
            ran = workers[-1] if time == 1 else worker(address)
            pid, job = job_pids(began, "only")
            assert pid == ran.pid
            jobs.append(job)
            (began / "only").unlink()  # the run again writes it anew
            seen = len(asks)
            wait_until(lambda seen=seen: any(asks[seen:]), what="the worker seen")
            ran.kill()
            ran.wait()
            wait_until(lambda time=time: len(said) == time, what="the lost worker said")
        stop_this_client()

    with local_cluster(n_workers=0, processes=True) as cluster:
        address = cluster.scheduler_address
        try:
            worker(address)
            with distributed.Client(address) as client:
                client.wait_for_workers(1)  # the first asks find it
            scheduler_info, warn = distributed.Client.scheduler_info, dask_client.warn

            def counted(client, *args, **kwargs):
                info = scheduler_info(client, *args, **kwargs)
                asks.append(len(info.get("workers", {})))
                return info

            monkeypatch.setattr(distributed.Client, "scheduler_info", counted)
            monkeypatch.setattr(dask_client, "warn", lambda text: (said.append(list(asks)), warn(text)))
            monkeypatch.setattr(dask_client, "NO_WORKER_S", 0.05)
            monkeypatch.setattr(fleet, "WIND_DOWN_S", 0)
            settings = Settings(str(tmp_path / "out"), 1)
            held = jobs_from([held_job(began, "only")])
            lines, _ = run_on_dask_beside(lambda: lose_it_twice(address), address, held, settings)
        finally:
            for process in workers:
                process.kill()
                process.wait()
    assert [asked[-3:] for asked in said] == [[1, 0, 0], [1, 0, 0]], said  # the worker, then two empty asks
    wait_until(lambda: not any(map(pid_alive, jobs)), what="the jobs ending with their workers")
    assert run_cli("prune").returncode == 0
    assert (lines[0].source, lines[0].message) == ("task_failed", "its Dask task did not come back"), lines


def test_as_above_is_said_only_below_a_lost_job_of_the_same_reason():
    """Lost ``a``, a spawn failure ``b``, then lost ``c`` with ``a``'s reason: ``c`` said
    ``(as above)`` under ``b``'s spawn error, the reason it meant three lines further up. It says
    ``(as above)`` only below a lost job of the same reason named just before it."""
    from processkit.batching.failures import closing
    from processkit.summary_line import JobLine

    def line(id: str, exit_code: int | None, source: str, message: str) -> JobLine:
        return JobLine(
            id, None, None, None, None, None, exit_code, source, None, None, 1, None, None, None, message, []
        )

    why = "its Dask task failed: cancelled by Dask (scheduler-restart)"
    lost = [
        line("a", None, "task_failed", why),
        line("b", 101, "spawn_error", "no such program"),
        line("c", None, "task_failed", why),
    ]
    assert closing(lost, 3, "out") == (
        f"  a: task failed\n    | {why}\n  b: exit 101 (spawn_error)\n    | no such program\n  c: task failed\n    | {why}\n"
    )
    assert closing([lost[0], lost[2]], 2, "out").endswith("  c: task failed\n    | (as above)\n")
