"""The batch's closing line says what happened in words that fit it: one line for a batch with no
job, saying what it did with its reports; a count's noun agreeing with it (``text.plural``)."""

from __future__ import annotations

from conftest import run_cli

BATCH_FAILED = 117


def test_an_empty_batch_into_an_earlier_batchs_out_closes_with_one_line_saying_what_it_wrote(tmp_path):
    """It printed two closing lines, ``no jobs in the manifest`` then ``0 of 0 jobs exited 0``,
    and neither said that the earlier batch's summary and page were replaced by empty ones."""
    out, report = tmp_path / "out", tmp_path / "junit.xml"
    (tmp_path / "one.jsonl").write_text('{"id": "one", "args": ["true"]}\n')
    (tmp_path / "empty.jsonl").write_text("")
    assert run_cli("batch", tmp_path / "one.jsonl", "--out", out).returncode == 0
    proc = run_cli("batch", tmp_path / "empty.jsonl", "--out", out)
    assert proc.returncode == 0, proc.stderr
    said = f"batch: no jobs in the manifest; wrote an empty summary and page in {out}\n"
    assert proc.stderr.decode() == said
    assert (out / "summary.jsonl").read_text() == ""
    proc = run_cli("batch", tmp_path / "empty.jsonl", "--out", out, "--junit", report)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode() == said.replace("\n", f", and an empty --junit {report}\n")
    assert 'tests="0"' in report.read_text()


def test_a_batch_of_one_job_counts_it_as_one_job(tmp_path):
    """``0 of 1 jobs exited 0``: the noun now agrees with the count it follows."""
    (tmp_path / "m.jsonl").write_text('{"id": "fails", "args": ["false"]}\n')
    proc = run_cli("batch", tmp_path / "m.jsonl", "--out", tmp_path / "out")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    assert proc.stderr.decode().splitlines()[-1] == "batch: 0 of 1 job exited 0, 1 failed"
