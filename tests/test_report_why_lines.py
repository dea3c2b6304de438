"""A failed run's page, and a batch's page, showed a capture's last 40 lines alone: a
compiler's first error, pytest's `E   assert`, written before them, was on neither page, while
the batch's closing block and its JUnit file (several jobs) showed it, with the lines left out
counted. Both pages now show the lines that say why above the last ones, each stretch left
out counted, and say so in the box's note; a run that exited 0 shows its last lines alone."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from test_report import page_text

NOISY = "echo 'error: the first error' >&2; seq 1 100 >&2; exit {code}"


@pytest.mark.parametrize("code", [2, 0])
def test_a_failed_runs_page_shows_the_lines_that_say_why(tmp_path, code):
    stream, page = tmp_path / "run.jsonl", tmp_path / "run.html"
    run_cli(
        "run",
        "--jsonl",
        stream,
        "--capture-dir",
        tmp_path / "c",
        "--",
        "sh",
        "-c",
        NOISY.format(code=code),
        cwd=tmp_path,
    )
    made = run_cli("report", stream, "--capture-dir", tmp_path / "c", "-o", page, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    text = page_text(page)
    if code:
        assert "error: the first error" in text and "60 lines not shown" in text, text
        assert "its 1 line(s) that say why and its last 40 line(s) of 315 B shown" in text, text
    else:
        assert "error: the first error" not in text and "its last 40 line(s) of 315 B shown" in text, text


def test_a_batch_pages_failed_job_shows_the_lines_that_say_why(tmp_path):
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": ["sh", "-c", NOISY.format(code=3)]}) + "\n")
    ran = run_cli("batch", "--out", tmp_path / "out", manifest, cwd=tmp_path)
    assert ran.returncode != 0 and b"error: the first error" in ran.stderr, ran.stderr  # the closing block
    made = run_cli("report", tmp_path / "out", "-o", tmp_path / "batch.html", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    text = page_text(tmp_path / "batch.html")
    assert "error: the first error" in text and "60 lines not shown" in text, text


def _failed_page(tmp_path, script: str, patched: tuple[str, ...] | None = None) -> str:
    """The text of the report page of a failed run of ``sh -c script``, its capture beside it."""
    stream, page = tmp_path / "run.jsonl", tmp_path / "run.html"
    run_cli("run", "--jsonl", stream, "--capture-dir", tmp_path / "c", "--", "sh", "-c", script, cwd=tmp_path)
    made = run_cli("report", stream, "--capture-dir", tmp_path / "c", "-o", page, cwd=tmp_path, patched=patched)
    assert made.returncode == 0, made.stderr
    return page_text(page)


# 71 lines that say why, 100 that do not, then a failure.
MANY = 'for n in $(seq 1 71); do echo "error: number $n"; done >&2; seq 1 100 >&2; exit 2'


def test_a_page_counts_the_lines_that_say_why_it_does_not_show(tmp_path):
    text = _failed_page(tmp_path, MANY)
    assert "its first 50 of 71 lines that say why and its last 40 line(s) of" in text, text
    assert "error: number 50" in text and "error: number 51" not in text, text
    assert "81 lines not shown" in text, text  # lines 51 to 131: 21 that say why among them


def test_a_capture_too_large_to_count_says_it_was_not_searched(tmp_path):
    # a capture over the bound of one read whole (256 MiB), that bound made 100 bytes
    text = _failed_page(tmp_path, NOISY.format(code=2), ("processkit.report.tail", "VERIFY_MAX_BYTES", "100"))
    assert "its last 40 line(s) of 315 B shown" in text and "error: the first error" not in text, text
    assert "so its SHA-256 was not checked, nor its lines searched for those that say why" in text, text


def test_a_capture_larger_than_the_part_searched_counts_only_that_part(tmp_path):
    # the part searched (64 MiB) made 2 KiB: the 71 lines that say why lie in it, the 5 in the
    # last lines past it; those were never counted, so none is taken off the 71, and the words
    # say where the count stops
    late = 'for n in $(seq 1 5); do echo "error: late $n"; done >&2'
    script = MANY.replace("seq 1 100", "seq 1 1000").replace("; exit 2", f"; {late}; exit 2")
    text = _failed_page(tmp_path, script, ("processkit.report.why_lines", "SCAN_BYTES", "2048"))
    words = "its first 50 of 71 lines that say why, its first 2 KiB searched (not counted past it), and its last 40"
    assert words in text and "error: late 5" in text, text
