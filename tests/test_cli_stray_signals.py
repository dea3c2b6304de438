"""A child's signal meant for "its parent" (``kill -USR1 $PPID``: an X server's readiness, a timer's
SIGALRM, a real-time one) reaches the CLI's runner, its parent: at their default these ended
``run``, ``batch`` and ``bench`` on the spot, the run's output after it lost, its stream cut before
``runner_exit``, the exit code the signal's (138, 140, ...) and, for a batch, every other job's
line lost with it. The runner drops them as the API's service does (``engine.signals``:
``STRAY_SIGNALS``); its stop signals keep their meaning (tests/test_run_signals.py)."""

from __future__ import annotations

import json

import pytest

from conftest import read_events, run_cli

# The child signals its runner, then says so and exits 3: the runner must live to echo that line
# and hand on the 3.
SIGNALLER = "kill -{} $PPID; echo after-the-signal; exit 3"


@pytest.mark.parametrize("signame", ["USR1", "USR2", "ALRM", "RTMIN"])
def test_a_childs_signal_to_its_runner_does_not_end_the_run(tmp_path, pump_backend, signame):
    stream = tmp_path / "run.jsonl"
    done = run_cli("run", "--jsonl", stream, "--", "sh", "-c", SIGNALLER.format(signame), cwd=tmp_path)
    assert done.returncode == 3, done.stderr.decode()
    assert done.stdout == b"after-the-signal\n"
    ends = [event for event in read_events(stream) if event["event"] == "runner_exit"]
    assert [(event["code"], event["source"]) for event in ends] == [(3, "child_exit")]


def test_a_jobs_signal_to_its_runner_does_not_end_the_batch(tmp_path):
    out = tmp_path / "out"
    done = run_cli(
        "batch", "--out", out, "--", "sh", "-c", "kill -{} $PPID; exit 0", ":::", "USR2", "ALRM", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert sorted(line["exit_code"] for line in lines if "exit_code" in line) == [0, 0], lines


def test_a_benchmarked_commands_signal_to_its_runner_does_not_end_the_benchmark(tmp_path):
    export = tmp_path / "bench.json"
    command = "kill -USR1 $PPID; kill -ALRM $PPID"
    done = run_cli("bench", "--runs", "2", "--style", "none", "--export-json", export, command, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert len(json.loads(export.read_text())["results"][0]["times"]) == 2
