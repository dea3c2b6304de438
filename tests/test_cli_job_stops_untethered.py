"""A child's ``kill -TSTP $PPID`` (or SIGTTIN, SIGTTOU) reaches its runner, its parent. With no
controlling terminal (CI, cron, a service: no terminal sends a job stop there, no shell continues
one) it stopped the runner for good where its process group was not orphaned: the run hung, its
child's exit never reaped. Such a runner drops them (``signals.has_terminal``); one with a
terminal keeps its job stop (tests/test_io_modes_job_stops.py). SIGSTOP cannot be caught: the
runner stays stopped until a SIGCONT, and then reports the run as it ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import SAFETY_NET, cli_command, read_events, wait_for_file

# The runner in a process group of its own whose parent (this wrapper, leading a session with no
# terminal) is outside it: a group the kernel does not call orphaned, so a stop signal stops it.
WRAPPER = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:], process_group=0))"


def _untethered(tmp_path, *args) -> subprocess.Popen:
    command = [sys.executable, "-c", WRAPPER, *cli_command(), *map(str, args)]
    return subprocess.Popen(
        command,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _ended(wrapper: subprocess.Popen) -> tuple[int, bytes]:
    try:
        out, _ = wrapper.communicate(timeout=SAFETY_NET)
    except subprocess.TimeoutExpired:
        os.killpg(wrapper.pid, signal.SIGKILL)  # the wrapper's session: the stopped runner and its child
        wrapper.communicate()
        pytest.fail("the runner never finished: stopped by its child's signal")
    return wrapper.returncode, out


@pytest.mark.parametrize("signame", ["TSTP", "TTIN", "TTOU"])
def test_a_childs_job_stop_does_not_stop_a_runner_with_no_terminal(tmp_path, pump_backend, signame):
    stream = tmp_path / "run.jsonl"
    script = f"kill -{signame} $PPID; echo after-the-signal; exit 3"
    rc, out = _ended(_untethered(tmp_path, "run", "--jsonl", stream, "--", "sh", "-c", script))
    assert rc == 3 and b"after-the-signal" in out
    assert read_events(stream)[-1]["event"] == "runner_exit"


def test_a_childs_job_stop_does_not_stop_a_batch_with_no_terminal(tmp_path, pump_backend):
    out = tmp_path / "out"
    rc, _ = _ended(
        _untethered(tmp_path, "batch", "--out", out, "--", "sh", "-c", "kill -{} $PPID", ":::", "TSTP", "TTIN")
    )
    assert rc == 0
    assert len((out / "summary.jsonl").read_text().splitlines()) >= 2


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()[0].decode()


@pytest.mark.parametrize("deadline", [None, "1s"])
def test_a_runner_its_child_sigstops_reports_the_run_as_it_ended_once_continued(tmp_path, pump_backend, deadline):
    """SIGSTOP is not to be caught: the runner stops (a same-user act) while its child goes on and
    exits; once continued it reaps that exit and reports it, its tree confirmed clean. Continued
    past its ``--timeout``, it still reports the exit that came before the deadline, not a timeout."""
    stream, mark = tmp_path / "run.jsonl", tmp_path / "stopped"
    script = f"kill -STOP $PPID; touch {mark}; exit 3"
    timeout = ("--timeout", deadline) if deadline else ()
    started = time.monotonic()
    wrapper = _untethered(tmp_path, "run", "--jsonl", stream, *timeout, "--", "sh", "-c", script)
    try:
        wait_for_file(mark)
        runner = _runner(wrapper.pid)
        deadline_at = time.monotonic() + SAFETY_NET
        while _state(runner) != "T" or (deadline and time.monotonic() < started + 1.5):
            assert time.monotonic() < deadline_at, "the runner was never stopped"
            time.sleep(0.02)
        os.kill(runner, signal.SIGCONT)
        rc, _ = _ended(wrapper)
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
    assert rc == 3
    events = {e["event"]: e for e in read_events(stream)}
    assert events["root_exited"]["outcome"] == "exited" and events["root_exited"]["code"] == 3
    assert events["runner_exit"]["source"] == "child_exit"
    assert events["cleanup_finished"]["remaining"] == 0 and not events["cleanup_finished"]["kill_error"]


def _runner(wrapper: int) -> int:
    """The wrapper's one child: the runner (its stream may not have begun when it was stopped)."""
    with open(f"/proc/{wrapper}/task/{wrapper}/children") as children:
        return int(children.read().split()[0])
