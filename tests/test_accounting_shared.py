"""A process-group run counted by the runner's reaped children (``getrusage(RUSAGE_CHILDREN)``,
the host's fallback where no cgroup counts) while the same runner carries another tree: the
reaped figure is both trees', so neither run may report it as its own ``total_cpu_ms``.

The ``bare`` layout of test_accounting: the fallback containment with no usable v1 hierarchy.
"""

from __future__ import annotations

import json

from conftest import run_cli
from streams import PY

BURN = """
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
start = time.process_time()
while time.process_time() - start < 0.8:
    pass
open(sys.argv[2], "w").close()
"""


def bare(monkeypatch, tmp_path):
    plain = tmp_path / "no-cgroup-v1"
    plain.mkdir()
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    monkeypatch.setenv("PROCESSKIT_CGROUP_V1_ROOT", str(plain))
    monkeypatch.delenv("PROCESSKIT_ACCOUNTING", raising=False)


def summaries(out) -> dict:
    return {line["id"]: line["resources"] for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}


def test_a_job_idle_beside_a_burner_is_not_given_the_burners_cpu(tmp_path, monkeypatch):
    bare(monkeypatch, tmp_path)
    started, done = tmp_path / "started", tmp_path / "done"
    manifest = tmp_path / "jobs.jsonl"
    jobs = [
        {"id": "burn", "args": [PY, "-c", BURN, str(started), str(done)]},
        {
            "id": "idle",
            "args": ["sh", "-c", 'touch "$0"; while [ ! -e "$1" ]; do sleep 0.05; done', str(started), str(done)],
        },
    ]
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    result = run_cli("batch", manifest, "-j", "2", "--out", out)
    assert result.returncode == 0, result.stderr
    figures = summaries(out)
    # The idle job burnt a few ms of its own; the burner's 800 ms are not its.
    idle = figures["idle"]["total_cpu_ms"]
    assert idle is None or idle < 400, figures
    burn = figures["burn"]["total_cpu_ms"]
    assert burn is None or burn >= 800, figures


def test_jobs_one_after_another_keep_their_own_cpu(tmp_path, monkeypatch):
    bare(monkeypatch, tmp_path)
    (tmp_path / "started").touch()
    manifest = tmp_path / "jobs.jsonl"
    jobs = [
        {"id": "burn", "args": [PY, "-c", BURN, str(tmp_path / "started"), str(tmp_path / "done")]},
        {"id": "idle", "args": ["true"]},
    ]
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    result = run_cli("batch", manifest, "-j", "1", "--out", out)
    assert result.returncode == 0, result.stderr
    figures = summaries(out)
    assert figures["burn"]["total_cpu_ms"] >= 800, figures
    assert figures["idle"]["total_cpu_ms"] < 400, figures
