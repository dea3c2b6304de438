"""Every job of a batch carries ``batch=<the batch's id>``: ``list --label`` finds its jobs by it,
and a ``--dask-scheduler`` client knows a lost task's streams for its own by it
(``batching/ended.py``). A user's ``--label batch=nightly`` (or a line's ``"labels": {"batch":
...}``) once replaced it silently on every job: ``list --label batch=<id>`` named none of them,
``wait --all --label batch=nightly`` waited for the jobs live then, not for the batch (whose own
record keeps its id), and the refusal of ``inspect <id>`` pointed at jobs no list would show. Now
it is refused before anything runs, on one line saying to give another key."""

from __future__ import annotations

import json

from conftest import run_cli


def test_a_label_named_batch_on_the_command_line_is_refused_naming_the_flag(tmp_path):
    proc = run_cli("batch", "--out", "out", "--label", "batch=nightly", "--", "true", ":::", "a", cwd=tmp_path)
    said = proc.stderr.decode()
    assert proc.returncode == 100, said
    assert said.count("\n") == 1 and said.startswith("processkit-cli: invalid value 'batch=nightly' for '--label"), said
    assert "batch is the batch's own label" in said and "give yours another key (--label group=...)" in said, said
    assert not (tmp_path / "out").exists()


def test_a_manifest_lines_batch_label_is_refused_naming_its_line(tmp_path):
    lines = [{"args": ["true"], "id": "a", "labels": {"team": "x"}}, {"args": ["true"], "labels": {"batch": "n"}}]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    proc = run_cli("batch", "m.jsonl", "--out", "out", cwd=tmp_path)
    said = proc.stderr.decode()
    assert proc.returncode == 100, said
    assert said.count("\n") == 1 and said.startswith("processkit-cli: manifest line 2: invalid label key"), said
    assert "batch is the batch's own label" in said, said
    assert not (tmp_path / "out").exists()


def test_another_label_is_the_jobs_beside_the_batchs_own(tmp_path):
    proc = run_cli("batch", "--out", "out", "--label", "team=x", "--", "true", ":::", "a", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    started = json.loads((tmp_path / "out" / "a" / "events.jsonl").read_text().splitlines()[0])
    assert started["labels"]["team"] == "x" and started["labels"]["batch"].startswith("batch-"), started
