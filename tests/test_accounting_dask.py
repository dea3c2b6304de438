"""A Dask worker runs ``batch --dask-scheduler``'s chunks in its own process, beside tasks that
are not processkit's: such a task's ``subprocess.run`` collects its child there, unseen by the
runner, and that child's CPU lands in the worker's ``getrusage(RUSAGE_CHILDREN)``, the counter
a process-group job's figure is read from where no cgroup counts (``ChildrenUsage``). A job
open then may not report that CPU as its own: in a worker every such figure is null.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import SAFETY_NET
from streams import PY
from test_accounting_shared import BURN, bare
from local_cluster import local_cluster

distributed = pytest.importorskip("distributed")


def burn_beside(started: str, go: str, done: str, tell: str, reaped: str) -> None:
    """Another task of the worker: once the job has started, a burner run and collected here."""
    import os
    import time

    while not os.path.exists(started):
        time.sleep(0.01)
    subprocess.run([PY, "-c", BURN, go, done, tell], check=True)  # its child collected in the worker
    open(reaped, "w").close()


def test_a_dask_job_is_not_given_the_cpu_of_a_child_another_task_collected(tmp_path, monkeypatch):
    from processkit.batching import fleet
    from processkit.batching.manifest import jobs_from
    from processkit.batching.on_host import Settings

    bare(monkeypatch, tmp_path)
    started, go, done, tell, reaped = (str(tmp_path / name) for name in ("started", "go", "done", "tell", "reaped"))
    (tmp_path / "go").touch()
    wait = 'touch "$0"; while [ ! -e "$1" ]; do sleep 0.05; done'
    jobs = jobs_from([{"id": "idle", "args": ["sh", "-c", wait, started, reaped]}])
    out = tmp_path / "out"
    with local_cluster(n_workers=1, threads_per_worker=2, processes=True) as cluster:
        with distributed.Client(cluster) as client:
            beside = client.submit(burn_beside, started, go, done, tell, reaped, pure=False)
            lines, counts = fleet.run_on_dask(cluster.scheduler_address, jobs, Settings(str(out), 1))
            beside.result(timeout=2 * SAFETY_NET)
            after = client.run(unseen_hosts)
    assert counts.succeeded == 1, [line.as_json() for line in lines]
    figures = json.loads((out / "summary.jsonl").read_text())["resources"]
    assert figures["total_cpu_ms"] is None, figures
    assert figures["io_read_bytes"] is None and figures["io_write_bytes"] is None, figures
    assert list(after.values()) == [0], "a chunk's host, once closed, leaves the worker's later runs their figures"


def unseen_hosts() -> int:
    from processkit.containment.accounting import ChildrenUsage

    return getattr(ChildrenUsage, "_unseen", 0)  # (none before hosts were counted)
