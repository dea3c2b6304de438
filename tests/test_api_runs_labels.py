"""``processkit.runs(labels=...)`` reads its filter as ``run``'s ``labels`` mapping is read: a
wrong form is a TypeError naming it, never dict()'s words or an empty list."""

from __future__ import annotations

import pytest

import processkit
from conftest import start_cli
from streams import check_stream, wait_until


def test_runs_names_a_labels_filter_it_cannot_match_with(tmp_path, isolated_registry):
    stream = tmp_path / "r.jsonl"
    live = start_cli("run", "--jsonl", stream, "--label", "n=7", "--", "sleep", "30", cwd=tmp_path)
    try:
        wait_until(lambda: stream.exists() and b'"run_started"' in stream.read_bytes(), what="run_started")
        assert [run.labels for run in processkit.runs({"n": "7"})] == [{"n": "7"}]
        with pytest.raises(TypeError, match=r"^the value of 'n' in labels must be a string, not int$"):
            processkit.runs({"n": 7})  # matched no run, a label being a string, and said nothing
        with pytest.raises(TypeError, match=r"^labels takes a mapping of strings, not str$"):
            processkit.runs("n=7")  # was dict()'s "dictionary update sequence element #0 ..."
    finally:
        live.terminate()
        live.communicate()
    check_stream(stream, 107)
