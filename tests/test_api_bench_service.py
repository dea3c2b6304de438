"""``processkit.bench`` as a typed call on the runner service: its keywords read by the measured
options' table into the plan, the benchmark run in a process the service starts for it (not a
``processkit-cli bench`` command line), its failures naming keywords because the API asked, never
because an environment variable said so, and a Ctrl-C surfacing as the caller's
KeyboardInterrupt once every run has ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import processkit
from conftest import pid_alive, run_cli
from processkit.errors import Failure

PY = sys.executable
PACKAGE = Path(processkit.__file__).parent
OLD_VARIABLE = "PROCESSKIT_BENCH_" + "NAMING"  # split, so this file is no hit of its own search


def _wait_for(path: Path, seconds: float = 60) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.01)
    raise AssertionError(f"{path} never written")


def test_no_source_names_the_old_environment_variable():
    hits = [str(path) for path in PACKAGE.rglob("*.py") if OLD_VARIABLE in path.read_text(errors="replace")]
    assert hits == []


def test_the_api_builds_no_command_line_for_bench():
    source = (PACKAGE / "api" / "bench.py").read_text()
    for said in ("runner_command", "import subprocess", "--export-json", "def command_line", "def _arguments"):
        assert said not in source, said


def test_the_benchmarks_process_is_the_services_not_a_bench_command(tmp_path):
    """The command's parent is the process the service started for the benchmark."""
    parent = tmp_path / "parent"
    processkit.bench([["sh", "-c", f'tr "\\0" " " < /proc/$PPID/cmdline > {parent}']], runs=1)
    said = parent.read_text()
    assert "processkit.service.bench" in said and "--export-json" not in said, said


def test_a_keyword_is_named_whatever_the_environment_says(tmp_path, monkeypatch):
    """The naming travels with the plan: an environment variable of the old name neither makes
    the CLI name keywords nor is taken from the commands' environment."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(OLD_VARIABLE, "keywords")
    with pytest.raises(Failure) as raised:
        processkit.bench([["true"]], runs=1, jsonl_dir=blocker / "streams")
    assert raised.value.message.startswith(f"cannot make jsonl_dir={blocker / 'streams'}: ")
    done = run_cli("bench", "--runs", "1", "--jsonl-dir", blocker / "streams", "true", env=dict(os.environ))
    assert f"cannot make --jsonl-dir {blocker / 'streams'}: ".encode() in done.stderr, done.stderr
    seen = tmp_path / "seen"
    processkit.bench([["sh", "-c", f'printf %s "${OLD_VARIABLE}" > {seen}']], runs=1)
    assert seen.read_text() == "keywords"  # the caller's environment, as it is


INTERRUPTED = r"""
import sys, processkit
try:
    command = ["sh", "-c", 'echo $$ $PPID > "$0"; exec sleep 3737.25', sys.argv[1]]
    processkit.bench([command], runs=1, jsonl_dir=sys.argv[2])
except KeyboardInterrupt:
    print("interrupted", flush=True)
except BaseException as exc:
    print("raised", type(exc).__name__, exc, flush=True)
"""


@pytest.mark.parametrize("whom", ["bench", "caller"])
def test_a_ctrl_c_surfaces_as_the_callers_keyboard_interrupt_once_the_run_ended(tmp_path, whom):
    """SIGINT to the benchmark's process (its terminal's Ctrl-C) or to the caller alone: the
    benchmark stops through the run's release (its stream ends with ``runner_exit``), and the
    call raises KeyboardInterrupt."""
    pids, streams = tmp_path / "pids", tmp_path / "streams"
    caller = subprocess.Popen([PY, "-c", INTERRUPTED, str(pids), str(streams)], stdout=subprocess.PIPE)
    try:
        root, bench = (int(pid) for pid in _wait_for(pids).split())
        os.kill(bench if whom == "bench" else caller.pid, signal.SIGINT)
        assert caller.stdout.readline() == b"interrupted\n"
        assert not pid_alive(root), "the run ended before the interruption went on"
        (stream,) = streams.glob("*run-1.jsonl")
        last = json.loads(stream.read_text().splitlines()[-1])
        assert last["event"] == "runner_exit" and last["code"] == 107, last
        assert caller.wait(timeout=60) == 0
    finally:
        caller.kill()
        caller.wait()


def test_a_caller_that_dies_stops_its_benchmark(tmp_path):
    pids = tmp_path / "pids"
    caller = subprocess.Popen([PY, "-c", INTERRUPTED, str(pids), str(tmp_path)], stdout=subprocess.DEVNULL)
    try:
        root, bench = (int(pid) for pid in _wait_for(pids).split())
        caller.kill()
        caller.wait()
        deadline = time.monotonic() + 60
        while (pid_alive(root) or pid_alive(bench)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pid_alive(root) and not pid_alive(bench)
    finally:
        caller.kill()
        caller.wait()
