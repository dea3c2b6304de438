"""A ``--dask-scheduler`` batch whose stderr nobody reads still ends on its stop signal. Its
client has no loop of the batch's to queue its lines on, so each (a job's line, a warning) was a
blocking write: on a full pipe it waited for ever, inside the wait that holds a stop until the
task's lines are recorded, and a SIGTERM was noted and never acted on (the batch ran on, its
record never closed). Now such a write waits as a blocking one until a stop came, then
STALL_SECONDS at most, as one host's lines after a stop. The real CLI, a real ``LocalCluster``."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from conftest import SAFETY_NET, full_pipe, reaped, start_cli
from local_cluster import local_cluster
from streams import wait_until

pytest.importorskip("distributed")


def test_a_stop_ends_a_dask_batch_whose_stderr_nobody_reads(tmp_path):
    read_end, write_end = full_pipe()
    summary = tmp_path / "o" / "summary.jsonl"
    with local_cluster(n_workers=1, threads_per_worker=2, processes=True) as cluster:
        proc = start_cli(
            "batch",
            "--out",
            "o",
            "--dask-scheduler",
            cluster.scheduler_address,
            "--",
            "sh",
            "-c",
            "sleep {}",
            ":::",
            "0",
            "60",
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=write_end,
        )
        os.close(write_end)
        try:
            with reaped(proc):
                # the quick job recorded: its line is the client's write into the full pipe
                wait_until(lambda: summary.exists() and summary.read_bytes().count(b"\n") >= 1, what="job 0's line")
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=SAFETY_NET) == 107
        finally:
            os.close(read_end)
    ended = {line["id"]: line["source"] for line in map(json.loads, summary.read_text().splitlines())}
    assert ended == {"0": "child_exit", "60": "cancelled"}, ended
