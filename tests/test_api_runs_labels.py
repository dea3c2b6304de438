"""``processkit.runs(labels=...)`` reads its filter as ``run``'s ``labels`` is read (a mapping of
strings or a list of ``K=V``), through the label grammar ``inspect --all --label`` reads its own
by: a wrong form is a TypeError naming it, a bad key or value a ValueError in the CLI's words,
never dict()'s words, the grammar's internal Failure or an empty list."""

from __future__ import annotations

import pytest

import processkit
from conftest import run_cli, start_cli
from streams import check_stream, wait_until


def test_runs_reads_a_labels_filter_as_run_does(tmp_path, isolated_registry):
    stream = tmp_path / "r.jsonl"
    live = start_cli("run", "--jsonl", stream, "--label", "n=7", "--", "sleep", "30", cwd=tmp_path)
    try:
        wait_until(lambda: stream.exists() and b'"run_started"' in stream.read_bytes(), what="run_started")
        assert [run.labels for run in processkit.runs({"n": "7"})] == [{"n": "7"}]
        assert [run.labels for run in processkit.runs(["n=7"])] == [{"n": "7"}]  # as run(labels=["n=7"])
        with pytest.raises(TypeError, match=r"^the value of 'n' in labels must be a string, not int$"):
            processkit.runs({"n": 7})  # matched no run, a label being a string, and said nothing
        for form, said in (("n=7", "labels takes a list or a mapping, not str"), ([("n", "7")], "each item of labels")):
            with pytest.raises(TypeError) as by_run:
                processkit.run(["true"], labels=form)
            with pytest.raises(TypeError) as by_runs:
                processkit.runs(form)  # "n=7" was dict()'s "dictionary update sequence element #0 ..."
            assert str(by_runs.value) == str(by_run.value) and str(by_run.value).startswith(said)
    finally:
        live.terminate()
        live.communicate()
    check_stream(stream, 107)


@pytest.mark.parametrize("key, value", [("bad key", "7"), ("n", "\x1b[2J")])
def test_runs_refuses_a_label_inspect_refuses_in_its_words(key, value, isolated_registry):
    """Each matched no run and returned ``[]`` without a word."""
    refused = run_cli("inspect", "--all", "--label", f"{key}={value}")
    assert refused.returncode == 100, refused.stderr
    said = refused.stderr.decode().strip().removeprefix("processkit-cli: ").replace("'--label'", "'labels='")
    with pytest.raises(ValueError) as raised:
        processkit.runs({key: value})
    assert str(raised.value) == said and "\x1b" not in said


def test_runs_refuses_a_nul_in_a_label_as_a_value_error(isolated_registry):
    """It raised the grammar's internal ``processkit.errors.Failure`` in the words of an
    environment's entries; before the labels filter was checked it returned ``[]``."""
    with pytest.raises(ValueError, match=r"^invalid label value for key 'n': at most 256 characters, no control"):
        processkit.runs({"n": "a\x00"})
