"""A ``--dask-scheduler`` batch stopped while its cluster has no worker at all: no task runs, none
can come back, and the stop waited out its whole wind-down (30 s past the jobs' longest grace)
before it ended, saying only that the tasks did not come back. It ends once two asks a telling
apart found no worker, and says why. A real ``LocalCluster`` with no worker, the real
``processkit-cli``; the wind-down made far longer than the test's own bound, so a wait for it
fails the test."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import SAFETY_NET, start_cli
from local_cluster import local_cluster
from streams import wait_until

distributed = pytest.importorskip("distributed")
CANCELLED = 107


def test_a_stop_with_no_worker_ends_at_once_and_says_why(tmp_path):
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out"
    manifest.write_text("".join(json.dumps({"id": id, "args": ["touch", str(tmp_path / id)]}) + "\n" for id in "ab"))
    endless = ("processkit.batching.fleet", "WIND_DOWN_S", str(10 * SAFETY_NET))
    with local_cluster(n_workers=0, processes=True) as cluster:
        batch = start_cli(
            "batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address,
            patched=endless, cwd=tmp_path,
        )  # fmt: skip
        try:
            with distributed.Client(cluster.scheduler_address) as client:  # the batch's tasks reached the scheduler
                count = lambda: client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))  # noqa: E731
                wait_until(lambda: count() > 0, what="the batch's tasks")
            batch.send_signal(signal.SIGTERM)
            _, err = batch.communicate(timeout=SAFETY_NET)
        finally:
            batch.kill()
    said = err.decode()
    assert batch.returncode == CANCELLED, said
    assert (
        "processkit-cli: warning: the Dask cluster had no worker at two asks a second apart: the stop did not wait "
        "for the batch's 2 tasks still out (a job a lost worker began may still run)\n" in said
    ), said
    assert "did not come back after the stop" not in said, said
    lines = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == ["a", "b"], lines
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
