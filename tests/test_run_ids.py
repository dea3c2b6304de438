"""A run given no id gets one in one grammar, whichever command carries it: the reference's
``run-<runner_pid>-<unix_nanos>`` (docs/run.md, ``--run-id``), from ``spec.new_run_id``
alone. ``bench`` once had a scheme of its own (``bench-<pid>-<nanos>-<n>``)."""

from __future__ import annotations

import json
import re
import subprocess
import time

from conftest import read_events, start_cli

GENERATED = re.compile(r"run-([0-9]+)-([0-9]+)")


def carried(*args, streams: list) -> list[str]:
    """The ids of the runs one ``processkit-cli`` process carried, each checked against the
    grammar: that process's pid, and a time while it ran."""
    before = time.time_ns()
    proc = start_cli(*args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.wait(timeout=60) == 0
    after = time.time_ns()
    ids = []
    for stream in streams:
        run_id = next(event for event in read_events(stream) if event["event"] == "run_started")["run_id"]
        match = GENERATED.fullmatch(run_id)
        assert match is not None and int(match[1]) == proc.pid and before <= int(match[2]) <= after, run_id
        ids.append(run_id)
    return ids


def test_run_batch_and_bench_generate_ids_in_the_references_one_grammar(tmp_path):
    ids = carried("run", "--jsonl", tmp_path / "run.jsonl", "--", "true", streams=[tmp_path / "run.jsonl"])
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"args": ["true"], "id": "job"}) + "\n")
    ids += carried("batch", manifest, "--out", tmp_path / "out", streams=[tmp_path / "out" / "job" / "events.jsonl"])
    runs = [tmp_path / "runs" / f"command-1-run-{n}.jsonl" for n in (1, 2)]
    ids += carried(
        "bench", "--runs", "2", "--style", "none", "--jsonl-dir", tmp_path / "runs", "-N", "true", streams=runs
    )
    assert len(set(ids)) == len(ids), ids
