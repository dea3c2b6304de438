"""A stopped Dask batch tells its workers the stop again while it waits for its tasks: each
RETOLD_S (a worker process started since never heard it), as docs/batch.md says, not again
after every task that comes back (a round to every worker for each of a large batch's tasks).
A real ``LocalCluster``, the client in this process."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from conftest import wait_for_file
from local_cluster import local_cluster
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

    def counted(client, label, source, within_s):
        tellings.append(source)
        untold = tell_stopped(client, label, source, within_s)
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
        handler = lambda: getattr(signal.getsignal(signal.SIGTERM), "__name__", None)  # noqa: E731
        wait_until(lambda: handler() == "on_signal", what="the client's stop handler")
        os.kill(os.getpid(), signal.SIGTERM)

    with local_cluster(n_workers=1, threads_per_worker=3, processes=True) as cluster:
        stopper = threading.Thread(target=stop_once_all_began)
        stopper.start()
        try:
            lines, counts = fleet.run_on_dask(cluster.scheduler_address, jobs, Settings(str(tmp_path / "out"), 3))
        finally:
            stopper.join()
    assert counts.cancelled_by == "sigterm" and sorted(line.id for line in lines) == ids
    assert all(line.run_id is not None for line in lines), "each job ran, and came back"
    assert tellings == ["sigterm"], tellings
