"""A command given as an argv (``--command JSON``, ``-- PROGRAM ARGS``) is named as a shell would
read it back: ``sh -c 'echo a  b'``, one word with its spaces, not ``sh -c echo a  b``, which
names another command. A word that needs no quoting is shown as it is (``sleep 0.1``)."""

from __future__ import annotations

import json

from conftest import run_cli


def test_an_argv_commands_words_are_quoted_in_its_name(tmp_path):
    out = tmp_path / "b.json"
    done = run_cli(
        "bench", "--runs", "2", "--style", "basic", "--export-json", out,
        "--command", '["sh", "-c", "echo a  b"]', "--command", '["true", "x"]', cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = done.stdout.decode()
    assert "Benchmark 1: sh -c 'echo a  b'\n" in shown, shown
    assert "Benchmark 2: true x\n" in shown, shown
    names = [result["command"] for result in json.loads(out.read_text())["results"]]
    assert names == ["sh -c 'echo a  b'", "true x"]


def test_a_program_after_the_double_dash_is_named_likewise(tmp_path):
    done = run_cli("bench", "--runs", "2", "--style", "basic", "--", "sh", "-c", "echo a  b", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Benchmark 1: sh -c 'echo a  b'\n" in done.stdout.decode()
