"""Every count a report page says agrees with its noun, at one and at two: the templates' one
``plural`` filter (``text.plural``), in place of an ``s`` spelt after each count."""

from __future__ import annotations

import json
import re

from conftest import run_cli
from report_streams import cleaned, event, started, write_stream
from test_batch_index import text
from test_bench_report import hyperfine_export

LATER = "2026-01-01T00:00:01.000Z"


def _run(path, run_id: str, many: int) -> None:
    """A finished run whose ``many`` members were seen in ``many`` snapshots, ``many`` of them
    outliving the root."""
    members = [{"pid": 4242 + n, "ppid": 1, "name": f"p{n}", "start_time": "1"} for n in range(many)]
    snapshots = [
        event("members_snapshot", reason="spawn" if n == 0 else "interval", read_error=False, members=members)
        for n in range(many)
    ]
    ending = [
        event("root_exited", LATER, outcome="exited", code=0, signal=None),
        event("cleanup_started", LATER, members_before=many, read_error=False),
        cleaned(LATER),
        event("runner_exit", LATER, code=0, source="child_exit", child_code=0),
    ]
    write_stream(path, [started(run_id), *snapshots, *ending])


def _title(path) -> str:
    return re.search(r"<title>(.*?)</title>", path.read_text(encoding="utf-8"), re.S).group(1)


def _report(*args) -> None:
    done = run_cli("report", *args)
    assert done.returncode == 0, done.stderr


def test_every_count_on_a_page_agrees_with_its_noun(tmp_path):
    for many, said in ((1, "1 process seen in 1 snapshot; "), (2, "2 processes seen in 2 snapshots; ")):
        _run(tmp_path / f"run{many}.jsonl", f"run-{many}", many)
        _report(tmp_path / f"run{many}.jsonl", "-o", tmp_path / f"run{many}.html")
        page = text(tmp_path / f"run{many}.html")
        assert said in page
        outlived = "1 member outlived the root (marked)" if many == 1 else "2 members outlived the root (marked)"
        assert outlived in page
        teardown = f"{many} process{'es' if many == 2 else ''} outlived it and {'were' if many == 2 else 'was'} stopped"
        assert teardown in page

    for many in (1, 2):
        streams = tmp_path / f"streams{many}"
        streams.mkdir()
        for n in range(many):
            _run(streams / f"r{n}.jsonl", f"r{n}", 1)
        _report(streams, "-o", tmp_path / f"index{many}.html")
        page = text(tmp_path / f"index{many}.html")
        assert f" {many} run{'s' if many == 2 else ''} " in page  # the heading
        assert f"{many} run{'s' if many == 2 else ''}" in _title(tmp_path / f"index{many}.html")
        commands = [(f"sleep 0.0{n}", [0.01 * (n + 1)] * 3) for n in range(many)]
        export = hyperfine_export(tmp_path / f"bench{many}.json", commands)
        _report(export, "-o", tmp_path / f"bench{many}.html")
        page = text(tmp_path / f"bench{many}.html")
        assert f"A hyperfine export: {many} command{'s' if many == 2 else ''}, each" in page

    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": ["true"]}) + "\n")
    assert run_cli("batch", manifest, "--out", tmp_path / "out").returncode == 0
    assert "Batch: 1 job " in text(tmp_path / "out" / "index.html")
    assert "batch: 1 job" in _title(tmp_path / "out" / "index.html")
    assert "1 jobs" not in _title(tmp_path / "out" / "index.html")


def test_the_reports_line_and_a_retried_jobs_bars_name_what_they_count(tmp_path):
    """``report DIR`` said "a batch of 1 jobs"; a retried job's first bar had no attempt number,
    so it read as the job's final result beside "(attempt 2)"."""
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": ["sh", "-c", "exit 3"]}) + "\n")
    out = tmp_path / "out"
    assert run_cli("batch", manifest, "--out", out, "--retries", "1").returncode != 0
    done = run_cli("report", out, "-o", tmp_path / "page.html")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().rstrip().endswith(": a batch of 1 job"), done.stdout
    titles = re.findall(r"<title>([^<]*)</title>", (tmp_path / "page.html").read_text(encoding="utf-8"))
    assert any(title.startswith("a (attempt 1): ") for title in titles), titles
    assert any(title.startswith("a (attempt 2): ") for title in titles), titles
