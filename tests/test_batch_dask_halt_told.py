"""How a chunk under ``--halt-on-failure`` meets the scheduler: its failure told without its job
loop waiting on the scheduler, and its check at the start best effort. Real ``LocalCluster``s
whose scheduler runs in the test's process, so a test can slow or break what it answers."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from conftest import SAFETY_NET, run_cli
from test_batch import write_manifest
from local_cluster import local_cluster

distributed = pytest.importorskip("distributed")


def _batch(tmp_path, jobs: list[dict], cluster) -> tuple[dict[str, dict], bytes]:
    """``jobs`` run with ``--jobs 2 --halt-on-failure`` on ``cluster``: their lines by id, and stderr."""
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out"
    write_manifest(manifest, jobs)
    args = ("batch", manifest, "--out", out, "--jobs", 2, "--halt-on-failure")
    result = run_cli(*args, "--dask-scheduler", cluster.scheduler_address, timeout=120)
    assert run_cli("prune").returncode == 0
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    return lines, result.stderr


def test_a_chunk_telling_its_halt_to_a_slow_scheduler_still_enforces_its_jobs_timeouts(tmp_path):
    """The failing chunk set the halt's ``Event`` and told the workers from its own job loop,
    waiting for the scheduler: meanwhile its other jobs' timeouts went unenforced (a job with
    ``timeout`` 1 ran on for as long as the scheduler took). Here the scheduler answers the set
    only once ``tick`` (timeout 1) has ended; it ends only if the loop goes on."""
    began, stream = tmp_path / "tick-began", tmp_path / "out" / "tick" / "events.jsonl"
    jobs = [
        {"args": ["sh", "-c", f"until [ -e {began} ]; do sleep 0.01; done; exit 1"], "id": "bad", "timeout": 100},
        {"args": ["sh", "-c", f"touch {began}; exec sleep 100"], "id": "tick", "timeout": 1},
        *({"args": ["true"], "id": f"j{n}"} for n in range(6)),
    ]  # one worker: 4 tasks, of 2 jobs each; bad and tick in one
    released: list[bool] = []
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        real_set = cluster.scheduler.handlers["event_set"]

        async def slow_set(name=None):
            deadline = time.monotonic() + SAFETY_NET / 2  # within the run's safety net: a failure is said
            while "runner_exit" not in (stream.read_text() if stream.exists() else "") and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            released.append(time.monotonic() < deadline)
            return real_set(name=name)

        cluster.scheduler.handlers["event_set"] = slow_set
        lines, err = _batch(tmp_path, jobs, cluster)
    assert released and all(released), err  # tick ended while the scheduler held the set
    assert (lines["bad"]["exit_code"], lines["tick"]["source"]) == (1, "timeout"), lines


def test_a_chunk_that_cannot_ask_whether_the_batch_halted_runs_its_jobs(tmp_path):
    """A chunk asks the scheduler at its start whether the batch halted; when that raised (a
    scheduler hiccup, a ``distributed`` without ``Event``) the task failed as a whole, every job
    ``task_failed`` though none had started. Now it runs them, as the halt is told: best effort."""

    def is_set_raises() -> None:
        def raises(self):
            raise OSError("the scheduler is not answering")

        distributed.Event.is_set = raises

    jobs = [{"args": ["true"], "id": f"j{n}"} for n in range(4)]
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        with distributed.Client(cluster.scheduler_address) as client:
            client.run(is_set_raises)
        lines, err = _batch(tmp_path, jobs, cluster)
    assert {name: (line["exit_code"], line["source"]) for name, line in lines.items()} == {
        job["id"]: (0, "child_exit") for job in jobs
    }, err
