"""Job control on a real terminal, continued from tests/test_io_modes_job_control.py (its shells):
a runner whose capture file is the terminal, stopped in the background by ``tostop``; Ctrl-Z
typed while the terminal is lent to the child; a ``--pty`` runner brought forward with ``fg``."""

from __future__ import annotations

import hashlib
import os
import termios
import time

import pytest

from conftest import SAFETY_NET, wait_for_event, wait_for_file
from test_io_modes_job_control import Late, Numbered, Shell, _echoed
from test_io_modes_terminal import _state_becomes


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
        deadline = time.monotonic() + 60
        while b"x" not in _echoed(shell.master) and time.monotonic() < deadline:
            time.sleep(0.02)  # the interrupted write's rest, then what followed, reach the terminal
        assert time.monotonic() < deadline, "nothing captured after the continue"
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
