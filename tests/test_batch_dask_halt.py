"""``--halt-on-failure`` across a Dask cluster: the first failure starts no other job, and the
jobs running then finish with their own lines, as on one host. Real ``LocalCluster``s."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from streams import check_stream

distributed = pytest.importorskip("distributed")


def test_a_job_running_when_a_dask_batch_halts_keeps_its_line(tmp_path):
    """The client cancelled every task not back at the first failure: a task that was running
    went on (Dask cannot stop one), its job ended with exit 0 and its stream said so, while its
    line said it never started (``halted``, so ``--resume`` ran it again), and the task's later
    jobs still started on the worker after the client had said the batch halted. Here ``slow``
    runs until ``bad``'s line is in the summary, so it is running when the batch halts."""
    out = tmp_path / "out"
    started = tmp_path / "slow-started"
    slow = f'touch {started}; until grep -q \'"id":"bad"\' {out / "summary.jsonl"}; do sleep 0.01; done'
    bad = f"until [ -e {started} ]; do sleep 0.01; done; exit 1"
    jobs = [
        {"args": ["sh", "-c", slow], "id": "slow", "timeout": 60},
        {"args": ["true"], "id": "after_slow"},
        {"args": ["sh", "-c", bad], "id": "bad", "timeout": 60},
        *({"args": ["true"], "id": f"other{n}"} for n in range(5)),
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as cluster:
        proc = run_cli(
            "batch", manifest, "--out", out, "--jobs", "1", "--halt-on-failure",
            "--dask-scheduler", cluster.scheduler_address, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 117, proc.stderr
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert sorted(lines) == sorted(job["id"] for job in jobs)
    assert (lines["slow"]["exit_code"], lines["slow"]["source"]) == (0, "child_exit"), lines["slow"]
    assert (lines["bad"]["exit_code"], lines["bad"]["source"]) == (1, "child_exit"), lines["bad"]
    for name, line in lines.items():  # each line true to what ran: a halted job has no stream
        if line["source"] == "halted":
            assert not (out / name).exists(), name
        else:
            check_stream(out / name / "events.jsonl", line["exit_code"])
    assert b"halted by --halt-on-failure" in proc.stderr, proc.stderr
