"""``bench -N`` and ``-S`` split a command line as hyperfine does (its ``shell-words`` crate) and
as a POSIX shell would: a backslash inside double quotes escapes ``$``, a backquote, ``"`` and
``\\`` and is kept before anything else, a backslash-newline joins lines, and a ``#`` that starts a
word begins a comment. ``shlex`` (used before) kept ``\\$`` whole and passed ``#`` on as a word,
so ``-N 'sh -c "kill -TERM \\$\\$"'`` exited 2 where hyperfine's exits 143."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import run_cli

LINE = 'printf "<%s>" "a\\$b" "x\\y" \'s\\t\' c\\\nd "" #e f'
WORDS = ["printf", "<%s>", "a$b", "x\\y", "s\\t", "cd", ""]


def test_no_shell_runs_the_words_a_shell_would(tmp_path):
    done = run_cli("bench", "-N", "--runs", "1", "--show-output", "--export-json", tmp_path / "b.json", LINE)
    assert done.returncode == 0, done.stderr
    assert b"<a$b><x\\y><s\\t><cd><>" in done.stdout, done.stdout[:200]
    assert json.loads((tmp_path / "b.json").read_text())["results"][0]["argv"] == WORDS
    killed = run_cli(
        "bench", "-N", "-i", "--runs", "1", "--export-json", tmp_path / "k.json", 'sh -c "kill -TERM \\$\\$"'
    )
    assert killed.returncode == 0, killed.stderr
    assert json.loads((tmp_path / "k.json").read_text())["results"][0]["exit_codes"] == [143]


def test_a_shell_given_with_s_is_split_the_same_way(tmp_path):
    done = run_cli("bench", "--runs", "1", "--show-output", "-S", "sh -e # a comment", "echo ok")
    assert done.returncode == 0, done.stderr
    refused = run_cli("bench", "-N", "--runs", "1", 'printf "a')
    assert refused.returncode == 100 and b"no closing quotation" in refused.stderr


@pytest.mark.skipif(shutil.which("hyperfine") is None, reason="hyperfine is not installed")
def test_hyperfine_runs_the_same_words(tmp_path):
    done = subprocess.run(
        ["hyperfine", "-N", "--runs", "1", "--show-output", "--export-json", str(tmp_path / "h.json"), LINE],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert b"<a$b><x\\y><s\\t><cd><>" in done.stdout, done.stdout[:200]
