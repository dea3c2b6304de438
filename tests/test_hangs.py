"""Hangs and bad input (issue 23): the drain's bounds whatever the producer and the reader do,
and failures after set-up that must still release everything and end the stream.

Faults that no outside timing can hit are injected the way tests/test_faults.py does: a small
wrapper program patches one function or constant of the engine, then runs the CLI's ``main``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from conftest import wait_for_event
from streams import check_stream

PY = sys.executable

# Runs the CLI with ``processkit.engine.<module>.<name>`` set to a Python expression first.
PATCHED_MAIN = """
import importlib, sys
module, name, value = sys.argv[1:4]
setattr(importlib.import_module("processkit.engine." + module), name, eval(value))
from processkit.cli.main import main
raise SystemExit(main(sys.argv[4:]))
"""

# A reader that is slow but live: it takes a pipe's worth now and then.
SLOW_READER = "import os, time\nwhile os.read(0, 65536): time.sleep(0.05)"


def _escapee_run(tmp_path, ceiling: str):
    """A runner (drain ceiling patched to ``ceiling`` seconds) whose child leaves an escapee
    (``setsid -f``) writing into the inherited stdout while the runner's stdout goes to a slow
    reader. Returns the runner, the reader, the JSONL and the escapee's pid file."""
    jsonl, pidfile = tmp_path / "run.jsonl", tmp_path / "escapee.pid"
    child = f"setsid -f sh -c 'echo $$ > {pidfile}; exec timeout 120 yes aaaa'; sleep 0.5; exit 3"
    env = dict(os.environ, PROCESSKIT_CONTAINMENT="process_group")
    reader = subprocess.Popen([PY, "-c", SLOW_READER], stdin=subprocess.PIPE)
    runner = subprocess.Popen(
        [PY, "-c", PATCHED_MAIN, "teardown", "DRAIN_CEILING_SECONDS", ceiling]
        + ["run", "--jsonl", str(jsonl), "--", "sh", "-c", child],
        stdin=subprocess.DEVNULL,
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert reader.stdin is not None
    reader.stdin.close()
    return runner, reader, jsonl, pidfile


def _end_escapee(reader, pidfile) -> None:
    try:
        with open(pidfile) as handle:
            os.kill(int(handle.read()), signal.SIGKILL)
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass
    reader.kill()
    reader.wait()


def test_an_escapee_refilling_the_pipe_for_a_slow_reader_ends_at_the_drain_ceiling(tmp_path):
    """The reader keeps making progress and the escapee keeps the backlog full: the drain still
    ends at its ceiling (patched to 1 s here), long before the escapee would, with one warning."""
    runner, reader, jsonl, pidfile = _escapee_run(tmp_path, "1.0")
    try:
        _, stderr = runner.communicate(timeout=60)  # unbounded, it would last the escapee's 120 s
    finally:
        _end_escapee(reader, pidfile)
    assert runner.returncode == 3
    assert [line for line in stderr.decode().splitlines() if line.startswith("processkit-cli:")] == [
        "processkit-cli: warning: the consumer of the runner's stdout was still behind after 1s of draining; "
        "live echo abandoned"
    ]
    check_stream(jsonl, 3)


def test_a_stop_signal_during_the_drain_ends_it_at_once(tmp_path):
    """The same producer and reader, a ceiling far away: SIGTERM to the runner once the tree is
    torn down ends the drain; the run's own ending and exit code stand."""
    runner, reader, jsonl, pidfile = _escapee_run(tmp_path, "600.0")
    try:
        wait_for_event(jsonl, "cleanup_finished", timeout=30)
        runner.send_signal(signal.SIGTERM)
        _, stderr = runner.communicate(timeout=60)
    finally:
        runner.kill()
        _end_escapee(reader, pidfile)
    assert runner.returncode == 3
    assert "a stop signal cut the drain of the runner's stdout short; live echo abandoned" in stderr.decode()
    events = check_stream(jsonl, 3)
    assert "cancelled" not in [e["event"] for e in events]
