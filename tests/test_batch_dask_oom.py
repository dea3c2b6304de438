"""A Dask task that failed as a whole reads its ended jobs' lines back from their streams: a job the
kernel's OOM killer hit lost its ``oom_kills`` there (no event holds the count), where a batch on
one host, and the same job's line from a task that came back, have it. The task's record on the
shared ``--out`` keeps the count now (``batching.began``). A real ``LocalCluster``."""

from __future__ import annotations

import json

import pytest

from local_cluster import batch_on_cluster
from test_limits_oom import TINY, skip_without_a_memory_cap

pytest.importorskip("distributed")


def test_a_line_read_back_from_a_failed_tasks_stream_keeps_its_oom_kills(tmp_path):
    skip_without_a_memory_cap()

    jobs = [
        {"args": ["true"], "id": "oom", "max_memory": int(TINY)},  # killed by the OOM killer every time
        {"args": ["sh", "-c", "kill -9 $PPID; sleep 30"], "id": "killer"},  # its worker, so its task, dies
        *({"args": ["true"], "id": f"j{n}"} for n in range(3)),
    ]  # one worker: chunks of two, ``oom`` then ``killer`` in one task (--jobs 1)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    proc = batch_on_cluster(manifest, out, "--jobs", "1", allowed_failures=0)
    assert proc.returncode == 117, proc.stderr
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert lines["killer"]["source"] == "task_failed", lines["killer"]
    assert lines["oom"]["exit_code"] == 137 and lines["oom"].get("oom_kills", 0) >= 1, lines["oom"]
    assert b"(1 of them had ended: its line is read from its stream)" in proc.stderr, proc.stderr
    said = [line for line in proc.stderr.decode().splitlines() if line.startswith("batch: oom: ")]
    assert said and "OOM killer ended" in said[0], said
