"""A control ``kill`` of a run already in a graceful stop's grace cuts the grace short but keeps
that stop's ending and code: the help said only "it exits 109", so a caller escalating after a
cancel or a timeout expected 109 and read 108 or 106. Real runs, the real clients."""

from __future__ import annotations

from conftest import read_events, run_cli, wait_for_event
from control_support import cli_json, runs  # noqa: F401

STOPPING = "one already stopping keeps that stop's code"


def test_kill_help_says_a_run_already_stopping_keeps_its_code(tmp_path):
    listed = run_cli("--help", cwd=tmp_path).stdout.decode()
    assert f"hard-kill a live run (it exits 109; {STOPPING})" in listed, listed
    said = " ".join(run_cli("kill", "--help", cwd=tmp_path).stdout.decode().split())
    assert "it exits 109. A run already stopping (a cancel, a timeout, a stop signal) keeps that stop's code" in said


def test_a_kill_in_a_timeouts_grace_keeps_the_timeouts_code(runs, tmp_path):  # noqa: F811
    run = runs(
        "sh", "-c", "trap '' TERM; sleep 1200", run_id="late", options=("--timeout", "1s", "--grace", "10m"), cwd=tmp_path
    )  # fmt: skip
    wait_for_event(run.jsonl, "cleanup_started")  # the timeout's grace runs from here
    assert cli_json("kill", "--run-id", "late")["accepted"]
    assert run.finish() == 106
    events = read_events(run.jsonl)
    assert not [e for e in events if e["event"] == "killed"]
    assert events[-1]["event"] == "runner_exit" and events[-1]["code"] == 106, events[-1]
