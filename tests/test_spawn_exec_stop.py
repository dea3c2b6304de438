"""A stop signal reaches a runner whose child is still inside its execve (a hung mount, a lease):
the run ends cancelled at once, its child killed before it ever runs, as a stop during setup
ends it (launch._stopped). The runner once waited for the exec's report in C, retrying its wait
at each signal, so a CLI ``run`` (and a batch's job, whose wait on the loop took no signal into
account) stayed deaf to SIGTERM until the exec ended.

The child is held in its execve by a write lease on its program, a script, as in
tests/test_spawn_no_wait.py: its exec waits until this process lets the lease go."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from test_spawn_no_wait import HeldExec
from conftest import SAFETY_NET

pytest.importorskip("processkit._native")
pytestmark = pytest.mark.skipif(
    os.environ.get("PROCESSKIT_SPAWN") == "python", reason="Popen's spawn waits for the exec by design"
)

CLI = str(Path(sys.executable).with_name("processkit-cli"))


def _held_program(tmp_path) -> tuple[Path, Path]:
    program, marker = tmp_path / "held", tmp_path / "ran"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(0o755)
    return program, marker


def _stopped_while_held(tmp_path, argv: list[str], program: Path, stop: bool = True) -> subprocess.CompletedProcess:
    """``argv`` started with ``program`` held in its exec, then SIGTERM (unless ``stop`` is
    False: ``argv`` sends its own): it must end meanwhile."""
    held = HeldExec(program)
    try:
        runner = subprocess.Popen(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if stop:
            held.wait_for_the_exec()
            runner.send_signal(signal.SIGTERM)
        try:
            # A bound on a failure, not a timing: before, the runner waited for the lease.
            _, stderr = runner.communicate(timeout=SAFETY_NET)
        except subprocess.TimeoutExpired:
            runner.kill()
            runner.communicate()
            raise AssertionError("the runner did not end while its child was held in its exec") from None
    finally:
        held.release()
    return subprocess.CompletedProcess(argv, runner.returncode, b"", stderr)


def test_a_run_stopped_while_its_child_execs_ends_cancelled(tmp_path):
    program, marker = _held_program(tmp_path)
    jsonl = tmp_path / "run.jsonl"
    done = _stopped_while_held(tmp_path, [CLI, "run", "--jsonl", str(jsonl), "--", str(program)], program)
    assert done.returncode == 107, done.stderr
    assert done.stderr.decode().splitlines() == ["processkit-cli: run cancelled (SIGTERM): the child was not started"]
    events = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [event["event"] for event in events][-1] == "runner_exit"
    assert "spawn_failed" not in [event["event"] for event in events] and "run_started" not in [
        event["event"] for event in events
    ]
    assert not marker.exists(), "the child was not killed before its exec"


def test_a_batch_stopped_while_a_jobs_child_execs_ends(tmp_path):
    program, marker = _held_program(tmp_path)
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"args": [str(program)], "id": "held"}) + "\n")
    out = tmp_path / "out"
    done = _stopped_while_held(tmp_path, [CLI, "batch", str(manifest), "--out", str(out), "--jobs", "2"], program)
    assert done.returncode != 0, done.stderr
    lines = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert [(line["id"], line["exit_code"]) for line in lines] == [("held", 107)], lines
    assert not marker.exists(), "the child was not killed before its exec"


# A CLI run whose stop signal comes after the runner's last look before it waits in C for the
# exec (here: from the step between the spawn and that wait), so that it interrupts no wait.
_SIGNALLED_BEFORE_THE_WAIT = """
import os, signal, sys
from processkit import containment
containment.restart_ahead = lambda rundir: os.kill(os.getpid(), signal.SIGTERM)
sys.argv = ["processkit-cli", "run", "--jsonl", "run.jsonl", "--", sys.argv[1]]
from processkit.cli.main import entry
entry()
"""


def test_a_stop_caught_just_before_the_wait_for_the_exec_ends_the_run(tmp_path):
    """The signal's handler ran before the wait began, so only the wake-up pipe's byte tells the
    wait in C: the runner once stayed deaf until the exec ended (the lease let go)."""
    program, marker = _held_program(tmp_path)
    argv = [sys.executable, "-c", _SIGNALLED_BEFORE_THE_WAIT, str(program)]
    done = _stopped_while_held(tmp_path, argv, program, stop=False)
    assert done.returncode == 107, done.stderr
    assert done.stderr.decode().splitlines() == ["processkit-cli: run cancelled (SIGTERM): the child was not started"]
    assert not marker.exists(), "the child was not killed before its exec"
