"""A runner with no controlling terminal (CI, cron, a service, a batch system) still stops like a
job: a ``kill -TSTP`` (or SIGTTOU) of it, as IBM LSF's ``bstop`` sends a job with no terminal,
stops its tree and the runner, and a ``kill -CONT`` of the runner continues both; the run then
ends reported as it ended. A child's ``kill -TSTP $PPID`` is the same same-user act and suspends
the job alike (docs/threat-model.md). SIGSTOP cannot be caught: the runner stays stopped until a
SIGCONT, and then reports the run as it ended. Pinned: main behaves so too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import SAFETY_NET, cli_command, read_events, wait_for_event, wait_for_file
from test_io_modes_terminal import _state_becomes

# The runner in a process group of its own whose parent (this wrapper, leading a session with no
# terminal) is outside it: a group the kernel does not call orphaned, so a stop signal stops it.
WRAPPER = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:], process_group=0))"


def _without_terminal(tmp_path, *args) -> subprocess.Popen:
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
        pytest.fail("the runner never finished")
    return wrapper.returncode, out


def _reported_as_ended(stream, code: int) -> None:
    events = {e["event"]: e for e in read_events(stream)}
    assert events["root_exited"]["outcome"] == "exited" and events["root_exited"]["code"] == code
    assert events["runner_exit"]["source"] == "child_exit"
    assert events["cleanup_finished"]["remaining"] == 0 and not events["cleanup_finished"]["kill_error"]


@pytest.mark.parametrize("signame", ["SIGTSTP", "SIGTTOU"])
def test_a_job_stop_of_a_runner_with_no_terminal_stops_its_tree_and_sigcont_resumes_it(tmp_path, pump_backend, signame):
    stream, ready, go = tmp_path / "run.jsonl", tmp_path / "ready", tmp_path / "go"
    # No fork in its wait: a shell stopped in a vfork of ``sleep`` waits for it uninterruptibly (D)
    script = (
        f"import os, sys, time\nopen({str(ready)!r}, 'x').close()\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\nprint('after-the-stop'); sys.exit(3)"
    )
    wrapper = _without_terminal(tmp_path, "run", "--jsonl", stream, "--", sys.executable, "-c", script)
    try:
        child = wait_for_event(stream, "run_started")["root_pid"]
        wait_for_file(ready)
        runner = _runner(wrapper.pid)
        os.kill(runner, getattr(signal, signame))
        assert _state_becomes(runner, "T"), "the runner was never stopped"
        assert _state_becomes(child, "T"), "the runner's tree ran on behind it"
        go.touch()  # seen only once the tree is continued
        os.kill(runner, signal.SIGCONT)  # the runner alone: it continues its tree
        rc, out = _ended(wrapper)
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
    assert rc == 3 and b"after-the-stop" in out
    _reported_as_ended(stream, 3)


@pytest.mark.parametrize("deadline", [None, "1s"])
def test_a_runner_its_child_sigstops_reports_the_run_as_it_ended_once_continued(tmp_path, pump_backend, deadline):
    """SIGSTOP is not to be caught: the runner stops (a same-user act) while its child goes on and
    exits; once continued it reaps that exit and reports it, its tree confirmed clean. Continued
    past its ``--timeout``, it still reports the exit that came before the deadline, not a timeout."""
    stream, mark = tmp_path / "run.jsonl", tmp_path / "stopped"
    script = f"kill -STOP $PPID; touch {mark}; exit 3"
    timeout = ("--timeout", deadline) if deadline else ()
    started = time.monotonic()
    wrapper = _without_terminal(tmp_path, "run", "--jsonl", stream, *timeout, "--", "sh", "-c", script)
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
    _reported_as_ended(stream, 3)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()[0].decode()


def _runner(wrapper: int) -> int:
    """The wrapper's one child: the runner (its stream may not have begun when it was stopped)."""
    with open(f"/proc/{wrapper}/task/{wrapper}/children") as children:
        return int(children.read().split()[0])
