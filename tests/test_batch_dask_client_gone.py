"""A ``--dask-scheduler`` batch whose client is gone (SIGKILL, the OOM killer, its host lost):
the scheduler lets its tasks go, and a chunk running on a worker stops as a batch whose caller is
gone does, not run the rest of its jobs for a summary nobody writes. Real ``LocalCluster``."""

from __future__ import annotations

import json
import time

import pytest

from conftest import SAFETY_NET, start_cli, wait_for_event, wait_for_file
from local_cluster import local_cluster


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
            deadline = time.monotonic() + SAFETY_NET
            while not _worker_idle(client):
                assert time.monotonic() < deadline, "the killed client's chunk did not return"
                time.sleep(0.05)
    assert sorted(path.name for path in began.iterdir()) == ["first"]
