"""A manifest's typical typos, as a new user makes them, each one line naming the fix: a line
without ``args`` (``"arg"``) said `args must be a list of strings ..., not NoneType`, a Python
type's name, and a misspelt keyword (``"timout"``) did not say which one was meant. The API's
keywords get the same hint (docs/batch.md, "The manifest"). Process-level: the real CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import SAFETY_NET, run_cli
from test_batch import write_manifest

USAGE = 100


@pytest.mark.parametrize(
    "job, said",
    [
        ({"arg": ["true"], "id": "a"}, "manifest line 1: args must name a program to run"),
        ({"id": "a"}, "manifest line 1: args must name a program to run"),
        (
            {"args": ["true"], "timout": "5s"},
            "manifest line 1: got an unexpected keyword argument 'timout' (did you mean 'timeout'?)",
        ),
        # A line's own keys are suggested too, and never one a line is refused (capture_dir).
        (
            {"args": ["true"], "neds": []},
            "manifest line 1: got an unexpected keyword argument 'neds' (did you mean 'needs'?)",
        ),
        (
            {"args": ["true"], "capture_dr": "c"},
            "manifest line 1: got an unexpected keyword argument 'capture_dr' (did you mean 'capture_keep'?)",
        ),
    ],
)
def test_a_manifest_typo_says_what_to_write(tmp_path, job, said):
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", [job]), "--out", tmp_path / "out")
    assert proc.returncode == USAGE, proc.stderr
    assert proc.stderr.decode() == f"processkit-cli: {said}\n"
    assert not (tmp_path / "out").exists()


def test_an_api_keyword_typo_names_the_keyword_meant(tmp_path):
    code = (
        "import processkit\ntry:\n    processkit.run(['true'], idle_timout=1)\nexcept TypeError as e:\n    print(e)\n"
    )
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=SAFETY_NET, cwd=tmp_path)
    assert (
        said.stdout.decode()
        == "run() got an unexpected keyword argument 'idle_timout' (did you mean 'idle_timeout'?)\n"
    )


def test_a_batch_keyword_typo_names_the_keyword_meant(tmp_path):
    """``processkit.batch(retrys=1)`` got Python's own TypeError, with no hint as run()'s has."""
    code = (
        "import processkit\ntry:\n    processkit.batch([{'args': ['true']}], out='o', retrys=1)\n"
        "except TypeError as e:\n    print(e)\n"
    )
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=SAFETY_NET, cwd=tmp_path)
    assert said.stdout.decode() == "batch() got an unexpected keyword argument 'retrys' (did you mean 'retries'?)\n"
    assert not (tmp_path / "o").exists()


def test_a_bench_keyword_typo_names_the_keyword_meant(tmp_path):
    """``processkit.bench``'s refusal is the same sentence as run()'s and batch()'s (one helper:
    ``keywords.unexpected``), its guess among its own keywords."""
    code = "import processkit\ntry:\n    processkit.bench(['true'], warmpu=1)\nexcept TypeError as e:\n    print(e)\n"
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=SAFETY_NET, cwd=tmp_path)
    expected = "processkit.bench() got an unexpected keyword argument 'warmpu' (did you mean 'warmup'?)\n"
    assert said.stdout.decode() == expected, said.stderr


def test_a_manifest_an_editor_began_with_a_byte_order_mark_runs(tmp_path):
    """Notepad's (or PowerShell's `-Encoding UTF8`) manifest begins with EF BB BF: its first line
    was `not JSON (Expecting value: line 1 column 1 (char 0))`, though it is JSON, which a
    parser may read past the mark (RFC 8259 §8.1). A mark later in the file is still no JSON."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b'\xef\xbb\xbf{"id": "a", "args": ["true"]}\r\n{"id": "b", "args": ["true"]}\r\n')
    proc = run_cli("batch", manifest, "--out", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == ["a", "b"]
    manifest.write_bytes(b'{"id": "a", "args": ["true"]}\n\xef\xbb\xbf{"id": "b", "args": ["true"]}\n')
    proc = run_cli("batch", manifest, "--out", tmp_path / "again", cwd=tmp_path)
    assert proc.returncode == USAGE and b"manifest line 2: not JSON" in proc.stderr, proc.stderr


def test_a_manifest_whose_first_line_is_the_mark_alone_runs(tmp_path):
    """A first line that is the byte order mark alone is a blank line, skipped as one is: it was
    refused (100), the mark stripped only after the blank check, then decoded as an empty value."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b'\xef\xbb\xbf\n{"id": "a", "args": ["true"]}\n')
    proc = run_cli("batch", manifest, "--out", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == ["a"]


@pytest.mark.parametrize("end", [b"\n", b"\r\n"], ids=["LF", "CRLF"])
def test_a_line_that_is_not_json_is_said_at_a_column_of_that_line(tmp_path, end):
    """A line cut short (its closing brace missing) was said to be wrong at `line 2 column 1
    (char 26)`: the parser had counted the line's own line feed, so the place named was the
    next line's start. It is now the column of the manifest line named."""
    manifest = tmp_path / "m.jsonl"
    lines = [b'{"args":["true"],"id":"a"}', b'{"args":["true"],"id":"b"', b'{"args":["true"],"id":"c"}']
    manifest.write_bytes(b"".join(line + end for line in lines))
    proc = run_cli("batch", manifest, "--out", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == USAGE, proc.stderr
    said = b"processkit-cli: manifest line 2: not JSON (Expecting ',' delimiter at column 26)\n"
    assert proc.stderr == said, proc.stderr
