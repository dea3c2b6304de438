"""A user's text in a message is shown as the ``Benchmark 1:`` header shows it, between single
quotes, never as Python's repr, which doubled every backslash: ``bench 'printf "a\\tb"; exit 1'``
said ``'printf "a\\\\tb"; exit 1' exited with 1``, and a manifest's duplicate ``run_id`` ``x\\y``
was named ``'x\\\\y'``."""

from __future__ import annotations

import json

from conftest import run_cli

COMMAND = 'printf "a\\\\tb"; exit 1'  # two backslashes, as the user typed them


def test_bench_s_failure_names_the_command_as_its_header_does(tmp_path):
    done = run_cli("bench", "--runs", "1", COMMAND, cwd=tmp_path)
    assert done.returncode != 0
    assert f"the command '{COMMAND}' exited with 1".encode() in done.stderr, done.stderr
    prepared = run_cli("bench", "--runs", "1", "--prepare", COMMAND, "true", cwd=tmp_path)
    assert f"'{COMMAND}'".encode() in prepared.stderr and b"\\\\\\\\" not in prepared.stderr, prepared.stderr


def test_a_duplicate_run_id_is_named_as_given(tmp_path):
    lines = [{"id": name, "args": ["true"], "run_id": "x\\y"} for name in ("a", "b")]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = run_cli("batch", tmp_path / "m.jsonl", cwd=tmp_path)
    assert done.returncode == 100
    assert b"duplicate run_id 'x\\y' (first on line 1)" in done.stderr, done.stderr


def test_a_refused_value_is_quoted_cut_as_every_refusal_quotes_it(tmp_path):
    """A refused value past 64 characters is quoted as its first 64 and its length (``text.cut``),
    as ``--error-format``'s is: ``--partition`` and ``bench -N``'s unsplittable command quoted
    theirs whole, through ``sanitize``."""
    value = "x" * 70
    shown = f"'{'x' * 64}... (70 characters)'".encode()
    partition = run_cli("batch", "--partition", value, "--out", tmp_path / "out", tmp_path / "m.jsonl", cwd=tmp_path)
    assert partition.returncode == 100 and shown + b" for '--partition" in partition.stderr, partition.stderr
    unsplit = run_cli("bench", "-N", "--runs", "1", f"'{value}", cwd=tmp_path)
    assert unsplit.returncode == 100 and b"cannot split the command " in unsplit.stderr, unsplit.stderr
    assert b"... (71 characters)' without a shell" in unsplit.stderr, unsplit.stderr
