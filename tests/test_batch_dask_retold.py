"""A stopped Dask batch tells its workers the stop again while it waits for its tasks: each
RETOLD_S (a worker process started since never heard it), as docs/batch.md says, not again
after every task that comes back (a round to every worker for each of a large batch's tasks);
and, its scheduler lost, it tells nothing and takes the tasks the loss failed at once. A real
``LocalCluster``, the client in this process."""

from __future__ import annotations

import os
import signal

import pytest

from conftest import pid_alive, wait_for_file
from local_cluster import local_cluster, run_on_dask_beside, stop_this_client
from streams import wait_until

distributed = pytest.importorskip("distributed")


def test_a_stopped_dask_batch_tells_its_workers_again_by_the_clock_not_by_each_task_back(tmp_path, monkeypatch):
    """Three one-job tasks running at once, each job ignoring the stop until the test lets it
    end: the first once the stop was told, each next once the one before was recorded, so they
    come back one by one. With RETOLD_S longer than the test, the stop is told once; it was told
    again after each task that came back (three times)."""
    from processkit.batching import fleet
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings
    from processkit.batching.recorder import Recorder

    began, free = tmp_path / "began", tmp_path / "free"
    began.mkdir()
    free.mkdir()
    ids = ["a", "b", "c"]
    held = "trap '' INT TERM HUP; touch {began}/{id}; until [ -e {free}/{id} ]; do sleep 0.01; done"
    jobs = jobs_from(
        [{"id": id, "args": ["sh", "-c", held.format(began=began, free=free, id=id)], "grace": "60s"} for id in ids]
    )
    tellings: list[str] = []
    tell_stopped, record = fleet.tell_stopped, Recorder.record

    def counted(client, label, source, within_s, *heard):
        tellings.append(source)
        untold = tell_stopped(client, label, source, within_s, *heard)
        (free / "a").touch()
        return untold

    def record_then_free(self, line) -> None:
        record(self, line)
        following = ids.index(line.id) + 1
        if following < len(ids):
            (free / ids[following]).touch()

    monkeypatch.setattr(fleet, "tell_stopped", counted)
    monkeypatch.setattr(fleet, "RETOLD_S", 3600.0)
    monkeypatch.setattr(Recorder, "record", record_then_free)

    def stop_once_all_began() -> None:
        for id in ids:
            wait_for_file(began / id)
        stop_this_client()

    with local_cluster(n_workers=1, threads_per_worker=3, processes=True) as cluster:
        settings = Settings(str(tmp_path / "out"), 3)
        lines, counts = run_on_dask_beside(stop_once_all_began, cluster.scheduler_address, jobs, settings)
    assert counts.cancelled_by == "sigterm" and sorted(line.id for line in lines) == ids
    assert all(line.run_id is not None for line in lines), "each job ran, and came back"
    assert tellings == ["sigterm"], tellings


def test_a_stop_while_the_client_records_a_task_its_scheduler_s_loss_failed_ends_at_once(tmp_path, monkeypatch):
    """Three one-job tasks running, the scheduler closed, the stop signal arriving as the client
    records the first task the loss failed: the wait that follows takes the other two at once,
    failed as the first (their jobs ran). It spun on the clock instead (no telling, so no wait),
    for its whole bound (30 s past the longest grace), then recorded them cancelled, never
    started."""
    import dask

    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings
    from processkit.batching.recorder import Recorder

    began, free, out = tmp_path / "began", tmp_path / "free", tmp_path / "out"
    began.mkdir()
    ids = ["a", "b", "c"]
    held = f"echo $$ > {began}/$0.new; mv {began}/$0.new {began}/$0; until [ -e {free} ]; do sleep 0.01; done"
    jobs = jobs_from([{"id": id, "args": ["sh", "-c", held, id]} for id in ids])
    record = Recorder.record

    def record_then_stop(self, line) -> None:
        record(self, line)
        if len(self.lines) == 1:  # the stop held until the task's lines are recorded, then raised
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(Recorder, "record", record_then_stop)
    quick = dask.config.set({"distributed.comm.timeouts.connect": "2s"})  # the nanny's farewell to no scheduler
    with quick, local_cluster(n_workers=1, threads_per_worker=3, processes=True) as cluster:

        def close_once_all_began() -> None:
            for id in ids:
                wait_for_file(began / id)
            cluster.sync(cluster.scheduler.close)

        try:
            lines, counts = run_on_dask_beside(
                close_once_all_began, cluster.scheduler_address, jobs, Settings(str(out), 3)
            )
        finally:
            free.touch()  # the jobs end, and their chunks with them
    pids = [int((began / id).read_text()) for id in ids]
    wait_until(lambda: not any(map(pid_alive, pids)), what="the jobs ending")
    assert counts.cancelled_by == "sigterm"
    assert sorted((line.id, line.source) for line in lines) == [(id, "task_failed") for id in ids], lines
