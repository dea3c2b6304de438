"""Work sent to Dask whose client is gone (Ctrl-C, SIGKILL, the OOM killer, its host lost): the
scheduler lets its tasks go, but Dask cannot stop a task that runs. A ``--dask-scheduler`` batch's
chunk running on a worker stops as a batch whose caller is gone does, not run the rest of its
jobs for a summary nobody writes; a ``processkit.run`` task's run is cancelled, not left to its
own end. And a stop the client sends reaches a worker process started since (a killed worker's
replacement). Real ``LocalCluster``s, real drivers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import SAFETY_NET, pid_alive, run_cli, start_cli, wait_for_event, wait_for_file
from local_cluster import held_job, job_pids, local_cluster
from processkit.batching.chunk import EARLIER_RUN_LOST
from processkit.batching.dask_client import LOST
from processkit.batching.fleet import NOT_BACK
from streams import wait_until
from test_batch import summary


def _worker_idle(client) -> bool:
    """No task of any batch left on the cluster's workers (the chunk returned, and was let go)."""
    return not any(client.run(lambda dask_worker: len(dask_worker.state.tasks)).values())


def test_a_dask_chunk_whose_client_was_killed_cancels_its_job_and_starts_no_other(tmp_path):
    """Eight jobs on one one-thread worker: two a task, the first task's jobs ``first`` (which
    runs until its own timeout) and ``second``. The client killed while ``first`` runs: ``first``
    is cancelled (``sighup``, a gone caller's source) and no other job begins on the worker. It
    ran to its timeout, then the chunk started ``second`` for a batch that was over."""
    distributed = pytest.importorskip("distributed")

    began = tmp_path / "began"
    began.mkdir()
    lines = [{"id": "first", "args": ["sh", "-c", f"touch {began}/first; exec sleep 60.0719"], "timeout": "30s"}]
    lines += [{"id": f"j{n}", "args": ["touch", str(began / f"j{n}")]} for n in range(7)]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        batch = start_cli("batch", manifest, "--out", out, "--jobs", "1", "--dask-scheduler", cluster.scheduler_address)
        wait_for_file(began / "first")
        batch.kill()
        batch.communicate(timeout=SAFETY_NET)
        ended = wait_for_event(out / "first" / "events.jsonl", "runner_exit")
        assert (ended["code"], ended["source"]) == (107, "cancelled"), ended
        assert wait_for_event(out / "first" / "events.jsonl", "cancelled")["source"] == "sighup"
        with distributed.Client(cluster.scheduler_address) as client:
            wait_until(lambda: _worker_idle(client), what="the killed client's chunk returning")
    assert sorted(path.name for path in began.iterdir()) == ["first"]


def test_a_run_on_a_dask_worker_whose_driver_got_ctrl_c_is_cancelled(tmp_path):
    """docs/fleet.md's fan-out: a driver gathering ``processkit.run`` tasks gets Ctrl-C. Its run
    on the worker is cancelled as a gone caller's (``sighup``); it ran on to its own timeout."""
    pytest.importorskip("distributed")

    began, events = tmp_path / "began", tmp_path / "run.jsonl"
    driver = textwrap.dedent(f"""
        import sys, distributed, processkit
        with distributed.Client(sys.argv[1]) as client:
            args = ["sh", "-c", "touch {began}; exec sleep 60.0721"]
            client.submit(processkit.run, args, jsonl={str(events)!r}, timeout="30s", pure=False).result()
    """)
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        gathering = subprocess.Popen([sys.executable, "-c", driver, cluster.scheduler_address], stderr=subprocess.PIPE)
        wait_for_file(began)
        gathering.send_signal(signal.SIGINT)
        gathering.communicate(timeout=SAFETY_NET)
        ended = wait_for_event(events, "runner_exit")
        assert (ended["code"], ended["source"]) == (107, "cancelled"), ended
        assert wait_for_event(events, "cancelled")["source"] == "sighup"


def test_a_dask_task_run_again_on_a_worker_started_since_the_stop_is_stopped_too(tmp_path):
    """The driver's Ctrl-C just after a worker died under its task: telling the stop to that dead
    worker failed the batch (104, an internal error); and the task runs again on the killed
    worker's replacement, a process that never heard the stop. Its job is cancelled too (the
    client tells the stop again while it waits); it ran on, past the client's wait."""
    pytest.importorskip("distributed")

    died, again = tmp_path / "died", tmp_path / "again"
    once = f"if [ ! -e {died} ]; then touch {died}; kill -9 $PPID; exec sleep 30; fi; touch {again}; exec sleep 60.0723"
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "deploy", "args": ["sh", "-c", once], "timeout": "40s"}) + "\n")
    out = tmp_path / "out"
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        batch = start_cli("batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address)
        wait_for_file(died)
        batch.send_signal(signal.SIGINT)
        _, err = batch.communicate(timeout=SAFETY_NET)
        assert batch.returncode == -signal.SIGINT, err
        line = json.loads((out / "summary.jsonl").read_text())
        if line["run_id"] is not None:  # it began again: stopped by the Ctrl-C, not by its own timeout
            ended = wait_for_event(out / "deploy" / "events.jsonl", "runner_exit")
            assert (ended["code"], ended["source"]) == (107, "cancelled"), ended
            assert (line["exit_code"], line["source"]) == (107, "cancelled"), line
        else:  # never began again; its first run (whose worker died) began it, so it ran: task_failed
            assert (line["exit_code"], line["source"]) == (None, "task_failed"), line
            # told before it began again: the replacement's chunk heard the stop and said the earlier
            # run's loss; or, on a loaded host, the client cancelled the task before the replacement
            # took it, and the client's own words say it did not come back (both true)
            assert line["message"] == EARLIER_RUN_LOST or line["message"].startswith(NOT_BACK), line
            assert not again.exists()


def test_a_stop_told_while_a_worker_cannot_answer_still_reaches_the_others(tmp_path):
    """The driver's Ctrl-C while a second worker cannot answer (stopped: SIGSTOP). Telling the stop
    waited for that worker (the scheduler's connect timeout, set here past the test's safety net),
    and the driver with it; told with a bound, the job on the first worker is cancelled and the
    driver ends by SIGINT. Under ``--halt-on-failure`` the cancelled job's line halts the batch,
    and the halt told to the workers waited for the stopped one for ever; it is bounded too, and
    one line names the worker it did not reach."""
    distributed = pytest.importorskip("distributed")
    import dask

    began = tmp_path / "began"
    manifest = tmp_path / "m.jsonl"
    args = ["sh", "-c", f"touch {began}; exec sleep 60.0727"]
    manifest.write_text(json.dumps({"id": "deploy", "args": args, "timeout": "40s"}) + "\n")
    out = tmp_path / "out"
    stuck = dask.config.set({"distributed.comm.timeouts.connect": f"{2 * SAFETY_NET}s"})
    with stuck, local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        address = cluster.scheduler_address
        batch = start_cli("batch", manifest, "--out", out, "--halt-on-failure", "--dask-scheduler", address)
        wait_for_file(began)
        with distributed.Client(cluster.scheduler_address) as client:
            first = set(client.run(os.getpid))
            cluster.scale(2)
            client.wait_for_workers(2)
            stopped, pid = next((at, pid) for at, pid in client.run(os.getpid).items() if at not in first)
        os.kill(pid, signal.SIGSTOP)
        try:
            batch.send_signal(signal.SIGINT)
            _, err = batch.communicate(timeout=SAFETY_NET)
        finally:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
        assert batch.returncode == -signal.SIGINT, err
        ended = wait_for_event(out / "deploy" / "events.jsonl", "runner_exit")
        assert (ended["code"], ended["source"]) == (107, "cancelled"), ended
    said = [line for line in err.decode().splitlines() if "did not answer the halt" in line]
    assert len(said) == 1 and stopped in said[0], err  # the other worker too, when load held its answer


def test_a_stopped_dask_batch_whose_scheduler_goes_during_its_wait_still_ends_by_the_signal(tmp_path):
    """Ctrl-C, then the scheduler gone while the client waits for a job that ignores the stop (its
    grace running): the client's tasks come back cancelled, and telling the stop again cannot
    reach a worker. The batch still dies by SIGINT; it failed with an internal error (104). What it
    says is its own lines, one of them the scheduler's loss, which fails the task out (its job
    ran: it was recorded ``not started``); Dask logged its reconnection's traceback there too."""
    pytest.importorskip("distributed")
    import dask

    pid_file = tmp_path / "pid"
    manifest = tmp_path / "m.jsonl"
    args = [
        "sh",
        "-c",
        f"trap '' INT TERM HUP; echo $$ > {pid_file}.new; mv {pid_file}.new {pid_file}; exec sleep 60.0729",
    ]
    manifest.write_text(json.dumps({"id": "deploy", "args": args, "grace": "60s"}) + "\n")
    out = tmp_path / "out"
    quick = dask.config.set({"distributed.comm.timeouts.connect": "2s"})  # the nanny's farewell to no scheduler
    with quick, local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        batch = start_cli("batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address)
        wait_for_file(pid_file)
        pid = int(pid_file.read_text())
        try:
            batch.send_signal(signal.SIGINT)
            wait_for_event(out / "deploy" / "events.jsonl", "cancelled")
            cluster.sync(cluster.scheduler.close)
            _, err = batch.communicate(timeout=SAFETY_NET)
        finally:
            os.kill(pid, signal.SIGKILL)
    assert batch.returncode == -signal.SIGINT, err
    said = (b"processkit-cli: ", b"batch: ", b"  deploy: task failed", b"    | its Dask task failed")  # ours alone
    assert all(line.startswith(said) for line in err.splitlines()), err
    assert b"a Dask task of 1 job failed: the connection to the Dask scheduler was lost\n" in err, err
    line = json.loads((out / "summary.jsonl").read_text())  # it ran: never "not started"
    assert (line["source"], line["message"]) == (
        "task_failed",
        "its Dask task failed: the connection to the Dask scheduler was lost",
    )


def test_a_halting_dask_batch_whose_scheduler_goes_says_the_loss_once(tmp_path):
    """``--halt-on-failure``, three one-job tasks running, the scheduler closed: one line says the
    loss for the three tasks it failed. Each task said it in a line of its own, and the client
    then waited a second to remove the halt from the scheduler it had lost, saying in one more
    line that the scheduler was not told the batch is over."""
    pytest.importorskip("distributed")
    import dask

    began, free = tmp_path / "began", tmp_path / "free"
    began.mkdir()
    held = f"echo $$ > {began}/$0.new; mv {began}/$0.new {began}/$0; until [ -e {free} ]; do sleep 0.01; done"
    ids = ["a", "b", "c"]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"id": id, "args": ["sh", "-c", held, id]}) + "\n" for id in ids))
    out = tmp_path / "out"
    quick = dask.config.set({"distributed.comm.timeouts.connect": "2s"})  # the nanny's farewell to no scheduler
    with quick, local_cluster(n_workers=1, threads_per_worker=3, processes=True) as cluster:
        address = cluster.scheduler_address
        batch = start_cli("batch", manifest, "--out", out, "--halt-on-failure", "--dask-scheduler", address)
        try:
            for id in ids:
                wait_for_file(began / id)
            cluster.sync(cluster.scheduler.close)
            _, err = batch.communicate(timeout=SAFETY_NET)
        finally:
            free.touch()  # the jobs end
    pids = [int((began / id).read_text()) for id in ids]
    wait_until(lambda: not any(map(pid_alive, pids)), what="the jobs ending")
    said = [line for line in err.decode().splitlines() if "scheduler" in line and "warning:" in line]
    assert said == [f"processkit-cli: warning: 3 Dask tasks of 3 jobs failed: {LOST}"], err
    assert err.decode().count(LOST) == 2, err  # and once below the first job the closing block names
    lines = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert sorted((line["id"], line["source"]) for line in lines) == [(id, "task_failed") for id in ids], lines


def test_a_dask_task_run_again_after_the_stop_records_the_job_its_first_run_began_task_failed(tmp_path):
    """Two workers with no nanny, one thread each: ``killer``'s job kills its worker while
    ``long`` holds the other. The stop then ends ``long``'s chunk (its worker notes the stop), and
    only then does that worker's one thread take ``killer``'s task, run again: it starts nothing,
    and ``killer``, which its first run began, is ``task_failed`` (an earlier run began it and
    never came back), never "not started, cancelled"."""
    distributed = pytest.importorskip("distributed")

    began, go = tmp_path / "began", tmp_path / "go"
    began.mkdir()
    killer = held_job(began, "killer", f"until [ -e {go} ]; do sleep 0.01; done; kill -9 $PPID; exec sleep 60.0733")
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in (killer, held_job(began, "long"))))
    with local_cluster(n_workers=0, processes=True) as cluster:
        command = [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address, "--no-nanny"]
        workers = [
            subprocess.Popen(
                command + ["--nthreads", "1"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            for _ in range(2)
        ]
        try:
            with distributed.Client(cluster.scheduler_address) as client:
                client.wait_for_workers(2)
            batch = start_cli(
                "batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address, cwd=tmp_path
            )
            try:
                (lost, first), (kept, _) = job_pids(began, "killer"), job_pids(began, "long")
                assert lost != kept  # one task on each worker
                go.touch()
                next(worker for worker in workers if worker.pid == lost).wait()
                batch.send_signal(signal.SIGTERM)
                _, err = batch.communicate(timeout=SAFETY_NET)
            finally:
                batch.kill()
        finally:
            for worker in workers:
                worker.kill()
                worker.wait()
    assert batch.returncode == 107, err
    wait_until(lambda: not pid_alive(first), what="the killed worker's job ending")
    assert run_cli("prune", cwd=tmp_path).returncode == 0  # what the killed worker's batch engine left
    lines = summary(out)
    assert (lines["long"]["exit_code"], lines["long"]["source"]) == (107, "cancelled"), lines["long"]
    assert (lines["killer"]["source"], lines["killer"]["message"]) == ("task_failed", EARLIER_RUN_LOST), lines
    assert b"after 1 of its jobs had begun (killer)" in err, err
