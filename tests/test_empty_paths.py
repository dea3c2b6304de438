"""An empty path given to any subcommand names none: a usage error (100) naming the flag, in
run's words (``grammar.path``), before anything is read, written or run."""

from __future__ import annotations

import os

import pytest

from conftest import run_cli
from streams import stderr_lines

CASES = [
    ("bench", "-r", "1", "-N", "--export-json", "", "true"),
    ("bench", "-r", "1", "-N", "--export-markdown=", "true"),
    ("bench", "-r", "1", "-N", "--export-csv", "", "true"),
    ("bench", "-r", "1", "-N", "--export-asciidoc", "", "true"),
    ("bench", "-r", "1", "-N", "--export-orgmode", "", "true"),
    ("bench", "-r", "1", "-N", "--baseline", "", "true"),
    ("bench", "-r", "1", "-N", "--jsonl-dir", "", "true"),
    ("events", "--file", ""),
    ("report", "-o", "", "run.jsonl"),
    ("report", "-o", "page.html", "--capture-dir", "", "run.jsonl"),
    ("report", "-o", "page.html", "--usage-file", "", "run.jsonl"),
    ("report", "-o", "page.html", "run.jsonl", ""),
    ("batch", ""),
    ("batch", "--history", "", "jobs.jsonl"),
    ("batch", "--trace", "", "jobs.jsonl"),
    ("batch", "--junit", "", "jobs.jsonl"),
]


def _named(words: tuple[str, ...]) -> str:
    """How the message names what was empty: the flag before it, or a positional's <METAVAR>."""
    at = words.index("") if "" in words else None
    if at is None:
        return next(word for word in words if word.endswith("=")).rstrip("=")
    before = words[at - 1]
    if before.startswith("-") and before not in ("-N",):
        return before
    return {"report": "<STREAM>", "batch": "<MANIFEST>"}[words[0]]


@pytest.mark.parametrize("words", CASES, ids=lambda words: " ".join(repr(word) for word in words))
def test_an_empty_path_is_a_usage_error_naming_the_flag(tmp_path, words):
    """Before, ``bench --export-json ''`` failed 111 (``cannot write : Is a directory``),
    ``events --file ''`` 111 (``could not open the events stream``), the others as opening
    the empty name failed, or (``bench --jsonl-dir ''``) not at all."""
    (tmp_path / "run.jsonl").write_text("")
    (tmp_path / "jobs.jsonl").write_text('{"args": ["touch", "ran"]}\n')
    before = sorted(os.listdir(tmp_path))
    proc = run_cli(*words, cwd=tmp_path)
    assert proc.returncode == 100, proc.stderr
    assert stderr_lines(proc)[0] == (
        f"processkit-cli: invalid value '' for '{_named(words)}': expected a path (an empty one names none)"
    )
    assert sorted(os.listdir(tmp_path)) == before
