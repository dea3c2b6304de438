"""A count and its noun agree: one input source, one command."""

from __future__ import annotations

from conftest import run_cli
from report_streams import event, started, write_stream


def test_a_template_naming_a_missing_input_source_says_there_is_only_one(tmp_path):
    done = run_cli("batch", "--out", tmp_path / "out", "--", "echo", "{3}", ":::", "a", "b")
    assert done.returncode == 100, done.stderr
    assert b"{3} names input source 3, and there is only 1 input source" in done.stderr
    done = run_cli("batch", "--out", tmp_path / "out", "--", "echo", "{3}", ":::", "a", ":::", "b")
    assert b"{3} names input source 3, and there are only 2 input sources" in done.stderr


def test_report_of_a_one_command_benchmark_says_one_command(tmp_path):
    exported = tmp_path / "one.json"
    done = run_cli("bench", "-N", "--runs", "2", "--export-json", exported, "true")
    assert done.returncode == 0, done.stderr
    done = run_cli("report", exported, "-o", tmp_path / "page.html")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().endswith(": a benchmark of 1 command\n"), done.stdout


def test_a_snapshot_cut_to_one_member_says_one_member(tmp_path):
    """A members snapshot whose list was cut (``read_error`` with members) counts what it holds."""
    member = {"pid": 4242, "ppid": 1, "name": "sleep", "start_time": "1"}
    path = tmp_path / "cut.jsonl"
    write_stream(path, [started(), event("members_snapshot", reason="spawn", read_error=True, members=[member])])
    done = run_cli("events", "--file", path)
    assert b"at spawn: only 1 member written: sleep (pid 4242)" in done.stdout, done.stdout
