"""A UTF-8 byte order mark (``EF BB BF``, as Notepad saves UTF-8) first in an input is skipped; one
elsewhere is kept. ``run --`` with the argv as JSON on stdin (ADR 0203's probe) refused it, "must
carry the command as a non-empty JSON array" (and a piped run id was unknown); a template's
``:::: FILE`` (or stdin) kept it in the first job's first argument, a character no terminal
shows."""

from __future__ import annotations

import json

from conftest import run_cli

BOM = b"\xef\xbb\xbf"


def test_the_argv_and_the_run_id_on_stdin_may_begin_with_a_mark(tmp_path):
    command = BOM + json.dumps(["printf", "<%s>", "\ufeffkept"]).encode()
    done = run_cli("run", "--jsonl", tmp_path / "e.jsonl", input=command, stdin=None, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "<\ufeffkept>".encode()), done.stderr
    asked = run_cli("--error-format", "json", "inspect", input=BOM + b"piped-run-42\n", stdin=None, cwd=tmp_path)
    assert asked.returncode == 103, asked.stderr
    assert json.loads(asked.stderr.decode().splitlines()[-1])["run_id"] == "piped-run-42"


def _args(result) -> list[list[str]]:
    assert result.returncode == 0, result.stderr
    return [json.loads(line)["args"] for line in result.stdout.decode().splitlines()]


def test_a_template_s_argument_source_may_begin_with_a_mark(tmp_path):
    (tmp_path / "args.txt").write_bytes(BOM + b"a\n" + BOM + b"b\n")
    expected = [["echo", "a"], ["echo", "\ufeffb"]]
    assert _args(run_cli("batch", "--dry-run", "--", "echo", "{}", "::::", "args.txt", cwd=tmp_path)) == expected
    piped = run_cli("batch", "--dry-run", "--", "echo", input=BOM + b"a\n" + BOM + b"b\n", stdin=None, cwd=tmp_path)
    assert _args(piped) == expected
    ran = run_cli("batch", "--out", "out", "--", "printf", "<%s>", input=BOM + b"a\n", stdin=None, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr  # a pipe read as its lines come
    assert [p.read_bytes() for p in (tmp_path / "out").glob("*/capture/stdout.log")] == [b"<a>"]
