"""Job control on a real terminal, continued from tests/test_io_modes_job_control.py (its shells):
a runner whose capture file is the terminal, stopped in the background by ``tostop``; Ctrl-Z
typed while the terminal is lent to the child; a ``--pty`` runner brought forward with ``fg``."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import termios
import textwrap
import time

import pytest

from conftest import SAFETY_NET, start_cli, wait_for_event, wait_for_file
from processkit.engine.terminal import SCREEN_RESET
from test_io_modes_job_control import CHILD, PY, Late, Numbered, Shell, _children, _echoed
from streams import read_until
from test_io_modes_terminal import Terminal, _runner_of, _state_becomes


@pytest.mark.parametrize("pump", ["native", "python"])
def test_a_background_runner_whose_capture_file_is_a_tostop_terminal_stops(tmp_path, monkeypatch, pump):
    """The capture file a symlink to the terminal (a device is a capture target), ``bg`` with
    ``tostop``: the capture's write raises SIGTTOU and fails EINTR, and the native pump retried
    it at once, for good, before the handler that stops the runner could run: the runner spun
    at full CPU in the background instead of stopping. Nothing written is lost after ``fg``."""
    if pump == "native":
        pytest.importorskip("processkit._native")
    monkeypatch.setenv("PROCESSKIT_PUMP", pump)
    shell = Numbered(tmp_path)
    try:
        shell.tostop()
        captures = tmp_path / "captures"
        captures.mkdir()
        (captures / "stdout.log").symlink_to(os.ttyname(shell._slave))
        shell.run("--capture-dir", str(captures), behaviour="print", placement="unused")
        runner, child = shell.stopped_again_in_the_background()  # by its next capture write
        assert _state_becomes(runner, "T")
        assert _state_becomes(child, "T")
        shell.cue_nth(2, "fg")
        # the interrupted write's rest, then what followed, reach the terminal
        read_until(shell.master, b"x", "nothing captured after the continue", 60)
        shell.go()
        assert shell.finish()["rc"] == 0
        stdout = wait_for_event(shell.jsonl, "output_captured")["stdout"]
        assert stdout["bytes_written"] == stdout["bytes_seen"] > 0 and not stdout["write_error"]
        assert stdout["sha256"] == hashlib.sha256(b"x\n" * (stdout["bytes_seen"] // 2)).hexdigest()
    finally:
        shell.close()


@pytest.mark.parametrize("mode", ["--inherit-stdio", "--inherit-stdin"])
def test_ctrl_z_typed_to_a_child_holding_the_terminal_stops_the_whole_job(tmp_path, mode):
    """Ctrl-Z reaches the terminal's foreground group, the child's while it is lent: the child
    stopped, the runner ran on, and the shell, waiting on the runner, never got its terminal
    back (every key, Ctrl-C too, went to the stopped group): the terminal hung until a ``kill
    -CONT`` from elsewhere. Now the runner stops with it, the shell says so, and ``fg`` lends the
    terminal again and continues the child, which reads what is typed next."""
    shell = Shell(tmp_path)
    try:
        shell.run(mode, behaviour="read", placement="fg")
        wait_for_file(f"{shell.report}.ready")
        child = wait_for_event(shell.jsonl, "run_started")["root_pid"]
        deadline = time.monotonic() + SAFETY_NET
        while shell.foreground_group() != child:  # lent: the keys go to the child's group
            assert time.monotonic() < deadline, "the terminal was never lent to the child"
            time.sleep(0.02)
        shell.type(b"\x1a")  # Ctrl-Z
        wait_for_file(f"{shell.result}.stopped")
        shell.brought_back_reads()
        ended = wait_for_event(shell.jsonl, "root_exited")
        assert ended["outcome"] == "exited" and ended["code"] == 0, ended
    finally:
        shell.close()


def test_a_pty_runner_started_in_the_background_takes_the_keys_once_brought_forward(tmp_path):
    """Started with ``&``, a ``--pty`` runner is no foreground job and leaves the keyboard alone;
    ``fg`` then sends a running job no signal, and the keyboard was never taken: the keys were
    read a line at a time by the caller's terminal, never reached the child, and its read waited
    for good. Now the runner takes the keys (raw mode) once it is the foreground job."""
    late = Late(tmp_path)
    try:
        before = termios.tcgetattr(late.master)
        late.run("--pty", behaviour="read", placement="fg-later")
        wait_for_event(late.jsonl, "run_started")
        wait_for_file(f"{late.report}.ready")
        assert termios.tcgetattr(late.master)[3] & termios.ICANON  # a background job: no raw mode
        (tmp_path / "host.json.fg").touch()
        deadline = time.monotonic() + SAFETY_NET
        while termios.tcgetattr(late.master)[3] & termios.ICANON:
            assert time.monotonic() < deadline, "the runner never took the keyboard"
            time.sleep(0.02)
        (tmp_path / "child.json.go").touch()
        late.type(b"typed line\n")
        wait_for_file(late.report)
        assert late.report.read_text() == "typed line\n"
        assert late.finish() == {"rc": 0, "foreground_is_host": True}
        assert termios.tcgetattr(late.master) == before
    finally:
        late.close()


def _after_its_sigchld(pid: int) -> str:
    """``pid``'s state once it took the SIGCHLD a child's stop sent it: ``T`` where it stopped,
    else ``S`` once it is back in its loop's wait with the signal no longer pending."""
    deadline = time.monotonic() + SAFETY_NET
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/status") as handle:
            fields = dict(line.split(":", 1) for line in handle.read().splitlines())
        if fields["State"].split()[0] == "T":
            return "T"
        pending = int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)
        with open(f"/proc/{pid}/wchan") as handle:
            waiting = handle.read() == "do_epoll_wait"
        if waiting and not pending & 1 << (signal.SIGCHLD - 1):
            return "S"
        time.sleep(0.01)
    raise AssertionError(f"{pid} never took its SIGCHLD")


def _lent_to_child(shell: Terminal) -> int:
    """The run's child once the terminal is lent to it."""
    child = wait_for_event(shell.jsonl, "run_started")["root_pid"]
    deadline = time.monotonic() + SAFETY_NET
    while shell.foreground_group() != child:
        assert time.monotonic() < deadline, "the terminal was never lent to the child"
        time.sleep(0.02)
    return child


def _stopped_child_reads(shell: Shell, placement: str, ctrl_z: bool) -> None:
    """An ``--inherit-stdio`` child lent the terminal, stopped by Ctrl-Z or a ``kill -STOP``:
    its runner takes the SIGCHLD and runs on, the child stays stopped until a ``kill -CONT``,
    then reads the line typed next."""
    shell.run("--inherit-stdio", behaviour="read", placement=placement)
    child = _lent_to_child(shell)
    if ctrl_z:
        shell.type(b"\x1a")
    else:
        os.kill(child, signal.SIGSTOP)
    assert _state_becomes(child, "T")
    assert _after_its_sigchld(_runner_of(child)) == "S", "the runner stopped as a job"
    with open(f"/proc/{child}/stat") as handle:
        assert handle.read().rsplit(")", 1)[1].split()[0] == "T", "the runner continued the child"
    os.kill(child, signal.SIGCONT)
    shell.go()
    shell.type(b"typed line\n")
    wait_for_file(shell.report)
    assert shell.report.read_text() == "typed line\n"


def test_a_kill_stop_of_a_child_holding_the_terminal_is_not_a_job_stop(tmp_path):
    """A supervisor or throttler that stops and continues the child (``kill -STOP``, then
    ``-CONT``) is not a job stop: the runner stopped as a job on it, and the run stayed parked
    until someone typed ``fg``. The runner now runs on, and the child with it once continued."""
    shell = Shell(tmp_path)
    try:
        _stopped_child_reads(shell, "fg", ctrl_z=False)
        assert shell.finish() == {"rc": 0, "holder": "runner"}
        assert not (tmp_path / f"{shell.result.name}.stopped").exists()
    finally:
        shell.close()


# A runner that leads its own session on the terminal (``tmux new-session``, ``ssh -t``): no shell above it.
LEADER = "import fcntl, os, sys, termios\nfcntl.ioctl(0, termios.TIOCSCTTY, 0)\nos.execvp(sys.argv[3], sys.argv[3:])\n"


class Leader(Shell):
    HOST = LEADER


def test_a_runner_leading_its_session_leaves_a_stopped_child_stopped(tmp_path):
    """A runner no shell can stop or continue (its group orphaned: the kernel discards its
    SIGTSTP) undid a Ctrl-Z of its child at once (its suspend's SIGCONT) and forgot the lend,
    though the child's group still held the terminal. The child now stays stopped until it is
    continued (``kill -CONT``), and then reads what is typed."""
    leader = Leader(tmp_path)
    try:
        _stopped_child_reads(leader, "session", ctrl_z=True)
        assert leader.host.wait(SAFETY_NET) == 0
    finally:
        leader.close()


# The API's caller: a run whose child takes the terminal, another in a thread writing ticks.
API_TWO = textwrap.dedent(
    """
    import json, os, sys, threading, processkit
    child, report, ticks, out = sys.argv[1:5]
    loop = f"while [ ! -e {report} ]; do echo x >> {ticks}; sleep 0.05; done"
    ticker = threading.Thread(target=processkit.run, args=(["sh", "-c", loop],), kwargs={"timeout": 60})
    ticker.start()
    ran = processkit.run([sys.executable, "-c", child, report, "read"], inherit_stdio=True, timeout=60)
    ticker.join()
    with open(out, "w") as handle:
        json.dump({"rc": ran.returncode, "foreground_is_caller": os.tcgetpgrp(0) == os.getpgrp()}, handle)
    """
)


def _api_lent(shell: Shell) -> tuple[int, int]:
    """``API_TWO`` under the shell, its ticks begun and its terminal lent: (its child, the service)."""
    ticks = shell.dir / "ticks"
    command = [PY, "-c", API_TWO, CHILD, str(shell.report), str(ticks), str(shell.dir / "out.json")]
    shell.start_host("fg", command)
    wait_for_file(ticks)
    (caller,) = _children(shell.host.pid)
    deadline = time.monotonic() + SAFETY_NET
    while shell.foreground_group() == caller:
        assert time.monotonic() < deadline, "the terminal was never lent to the child"
        time.sleep(0.02)
    child = shell.foreground_group()
    return child, _runner_of(child)


def _api_child_reads(shell: Shell) -> None:
    """The child reads the line typed next, and the caller finds the terminal its own after the run."""
    shell.go()
    shell.type(b"typed line\n")
    assert shell.finish()["rc"] == 0
    assert json.loads((shell.dir / "out.json").read_text()) == {"rc": 0, "foreground_is_caller": True}


def test_ctrl_z_to_an_api_child_holding_the_terminal_stops_neither_the_service_nor_other_runs(tmp_path):
    """The API's service is in its caller's group, so it lends its caller's terminal; it stopped
    as a job at its child's Ctrl-Z, and sent every other run's tree SIGTSTP, until the caller's
    stall check continued it; then it forgot the lend the child still held and left the terminal
    with the child's dead group. Job control is not forwarded there: the child stops alone."""
    shell = Shell(tmp_path)
    try:
        child, service = _api_lent(shell)
        shell.type(b"\x1a")  # Ctrl-Z
        assert _state_becomes(child, "T")
        assert _after_its_sigchld(service) == "S", "the service stopped as a job"
        ticks, deadline = tmp_path / "ticks", time.monotonic() + SAFETY_NET
        seen = ticks.stat().st_size
        while ticks.stat().st_size == seen:  # the other run's tree writes on
            assert time.monotonic() < deadline, "the other run stopped"
            time.sleep(0.02)
        os.kill(child, signal.SIGCONT)
        _api_child_reads(shell)
    finally:
        shell.close()


def test_an_api_service_stopped_and_continued_keeps_the_lend_its_child_holds(tmp_path):
    """A ``kill -TSTP`` of the service stops it with its trees, and its caller continues it
    (api/stopped.py): no shell took the terminal, which the child's group still held, but the
    continued service forgot the lend, looked for the terminal every 250 ms for the rest of
    the run, and left it with the child's dead group: the caller's next read stopped."""
    shell = Shell(tmp_path)
    try:
        child, service = _api_lent(shell)
        os.kill(service, signal.SIGTSTP)
        assert _state_becomes(service, "T")
        assert _state_becomes(service, "S"), "the caller continues its service"
        assert shell.foreground_group() == child
        _api_child_reads(shell)
    finally:
        shell.close()


# The API's caller: its service started with no TERM, a child lent the terminal after the caller set one.
API_TERM = textwrap.dedent(
    """
    import os, sys, processkit
    os.environ.pop("TERM", None)
    processkit.run(["true"], timeout=60)  # the service starts with the caller's environment then
    os.environ["TERM"] = "xterm"
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    sys.exit(processkit.run([sys.executable, "-c", killed], inherit_stdio=True, timeout=60).returncode != -9)
    """
)


def test_the_screen_of_an_api_child_is_reset_by_its_callers_terminal_type(tmp_path):
    """The reset after a killed child asked the runner's own ``TERM``: the API's service read the
    one it was started with, not its caller's, and wrote nothing to the caller's ``xterm``."""
    shell = Shell(tmp_path)
    try:
        shell.start_host("fg", [PY, "-c", API_TERM])
        assert shell.finish()["rc"] == 0
        os.set_blocking(shell.master, False)
        written = b""
        while chunk := _echoed(shell.master):
            written += chunk
        assert SCREEN_RESET in written, written
    finally:
        shell.close()


def test_a_pty_run_with_no_keyboard_to_take_leaves_sigcont_alone(tmp_path):
    """A ``--pty`` run whose stdin is no terminal never takes a keyboard, yet it caught SIGCONT
    for one (``Host.watch_continue``), for nothing."""
    go = tmp_path / "go"
    child = f"import os, time\nprint('ready', flush=True)\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)"
    runner = start_cli("run", "--pty", "--jsonl", tmp_path / "run.jsonl", "--", PY, "-c", child)
    try:
        assert b"ready" in runner.stdout.readline()  # echoed: its streams, and its watches, are set up
        with open(f"/proc/{runner.pid}/status") as handle:
            caught = int(dict(line.split(":", 1) for line in handle.read().splitlines())["SigCgt"], 16)
        assert not caught & 1 << (signal.SIGCONT - 1)
    finally:
        go.touch()
        runner.communicate(timeout=SAFETY_NET)  # its pipes closed with it
    assert runner.returncode == 0
