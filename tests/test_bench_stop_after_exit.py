"""A stop signal that reaches ``bench`` while a run's command is exiting (the spawn's linger for
its exit, the run's teardown): the benchmark stops at that run, as for a stop during the
command, never a run later, and never not at all when that run was the last."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import run_cli

# The command signals its parent (bench's process, which spawned it) and exits at once, so the
# signal arrives while bench waits for that exit or tears the run down.
SIGNALS_PARENT = "kill -{name} $PPID"


@pytest.mark.parametrize(
    ("name", "returncode"),
    [("INT", -signal.SIGINT), ("TERM", 107)],  # Ctrl-C: die by SIGINT, as for a stop during a run
)
def test_a_stop_during_the_last_runs_exit_stops_the_benchmark(tmp_path, name, returncode):
    out = tmp_path / "b.json"
    done = run_cli(
        "bench", "-N", "--runs", "1", "--style", "none", "--export-json", out,
        "--", "sh", "-c", SIGNALS_PARENT.format(name=name),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == returncode, done.stderr
    assert b"benchmark stopped during \"sh -c 'kill -" in done.stderr and b"'\": run cancelled" in done.stderr
    assert json.loads(out.read_text())["results"] == []  # as for a stop during a run: no command was done


def test_a_stop_during_a_runs_exit_starts_no_other_run(tmp_path):
    """The stop came during the second of three runs: it is that run's, so the third never
    begins (its child never started either way; its set-up is not made at all)."""
    ran = tmp_path / "ran"
    command = f'echo "$HYPERFINE_ITERATION" >> {ran}; [ "$HYPERFINE_ITERATION" = 1 ] && kill -INT $PPID; true'
    done = run_cli("bench", "-N", "--runs", "3", "--style", "none", "--", "sh", "-c", command, cwd=tmp_path)
    assert done.returncode == -signal.SIGINT, done.stderr
    assert ran.read_text().split() == ["0", "1"]
    assert b"the child was not started" not in done.stderr  # not the next run's, cancelled before its child
