"""A stop signal that reaches ``bench`` while its session's host closes (the lodging given back,
the signal watch ended: ``Engine.close`` -> ``Host.close``) stops the benchmark as one during
its last run does, never lost to an exit 0. ``run`` and ``batch``, which close a host too, keep
their own rules for a stop that late: ``run``'s teardown absorbs it (docs/run.md), and a batch's
tally was taken before its host closes. Process-level: the real CLI's entry in a process of its
own and a real signal, sent to itself as ``Host.close`` begins (no other hook reaches that
moment from outside)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

# The CLI's own entry, in a process whose ``Host.close`` first signals the process itself.
LATE_STOP = """
import os, signal, sys
from processkit.engine import host
real = host.Host.close
number = getattr(signal, sys.argv[1])
def close(self):
    os.kill(os.getpid(), number)
    real(self)
host.Host.close = close
sys.argv = ["processkit-cli", *sys.argv[2:]]
from processkit.cli.main import entry
entry()
"""


def _late_stop(name: str, *argv, cwd) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", LATE_STOP, name, *map(str, argv)]
    return subprocess.run(command, capture_output=True, timeout=120, cwd=cwd, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("name", "returncode"), [("SIGINT", -signal.SIGINT), ("SIGTERM", 107)])
def test_a_stop_while_the_session_host_closes_stops_the_benchmark(tmp_path, name, returncode):
    done = _late_stop(name, "bench", "-N", "--style", "none", "--runs", "2", "true", cwd=tmp_path)
    assert done.returncode == returncode, done.stderr
    assert b"benchmark stopped by a signal" in done.stderr


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_run_and_batch_keep_their_ending_for_a_stop_while_their_host_closes(tmp_path, name):
    ran = _late_stop(name, "run", "--jsonl", tmp_path / "run.jsonl", "--", "true", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    (tmp_path / "m.jsonl").write_text('{"args": ["true"]}\n{"args": ["true"]}\n')
    batch = _late_stop(name, "batch", "m.jsonl", "--out", tmp_path / "out", cwd=tmp_path)
    assert batch.returncode == 0, batch.stderr
    assert b"2 of 2 jobs exited 0" in batch.stderr
