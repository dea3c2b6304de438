"""Job control on a real terminal, continued from tests/test_io_modes_job_control.py (its shells):
a runner whose capture file is the terminal, stopped in the background by ``tostop``; a ``--pty``
runner continued with ``bg`` and then brought back with ``fg``."""

from __future__ import annotations

import os
import signal
import termios
import time

import pytest

from conftest import wait_for_event, wait_for_file
from test_io_modes_job_control import BASHLIKE, Numbered, Shell, _echoed, _raw_becomes
from test_io_modes_terminal import _runner_of, _state_becomes


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
        modes = termios.tcgetattr(shell.master)
        modes[3] |= termios.TOSTOP
        termios.tcsetattr(shell.master, termios.TCSANOW, modes)
        captures = tmp_path / "captures"
        captures.mkdir()
        (captures / "stdout.log").symlink_to(os.ttyname(shell._slave))
        shell.run("--capture-dir", str(captures), behaviour="print", placement="unused")
        os.set_blocking(shell.master, False)
        child = wait_for_event(shell.jsonl, "run_started")["root_pid"]
        runner = _runner_of(child)
        wait_for_file(f"{shell.report}.ready")
        os.kill(runner, signal.SIGTSTP)
        wait_for_file(f"{shell.result}.stopped1")
        while _echoed(shell.master):
            pass  # what was captured before the stop
        shell.cue_nth(1, "bg")
        wait_for_file(f"{shell.result}.stopped2", timeout=20)  # its next capture write, in the background
        assert _state_becomes(runner, "T")
        assert _state_becomes(child, "T")
        shell.cue_nth(2, "fg")
        deadline = time.monotonic() + 10
        while b"x" not in _echoed(shell.master) and time.monotonic() < deadline:
            time.sleep(0.02)  # the interrupted write's rest, then what followed, reach the terminal
        assert time.monotonic() < deadline, "nothing captured after the continue"
        shell.go()
        assert shell.finish()["rc"] == 0
        stdout = wait_for_event(shell.jsonl, "output_captured")["stdout"]
        assert stdout["bytes_written"] == stdout["bytes_seen"] > 0 and not stdout["write_error"]
    finally:
        shell.close()


# The bash-like shell, its ``bg`` followed on cue by ``fg`` of the job still running (no stop between).
BG_THEN_FG = BASHLIKE.replace(
    "    os.killpg(runner.pid, signal.SIGCONT)\n",
    "    os.killpg(runner.pid, signal.SIGCONT)\n"
    '    if cue == "bg":\n'
    '        while not os.path.exists(result + ".fg"):\n'
    "            time.sleep(0.02)\n"
    "        os.tcsetpgrp(0, runner.pid)\n"
    "        os.killpg(runner.pid, signal.SIGCONT)\n",
)


class BgThenFg(Shell):
    HOST = BG_THEN_FG


def test_a_pty_runner_continued_with_bg_then_fg_relays_keys_in_raw_mode_again(tmp_path):
    """Ctrl-Z, ``bg``, ``fg``: at ``bg`` the runner is a background job and leaves the shell's
    modes alone; the ``fg`` continues a runner already running, and nothing put raw mode back:
    keys were read a line at a time and Ctrl-C cancelled the run."""
    assert 'result + ".fg"' in BG_THEN_FG, "the shell was made from the bash-like one"
    shell = BgThenFg(tmp_path)
    try:
        shell.run("--pty", behaviour="wait", placement="bg")
        wait_for_event(shell.jsonl, "run_started")
        assert _raw_becomes(shell.master, True), "the runner relays keys in raw mode"
        runner = shell.stop_runner(signal.SIGTSTP)
        assert _raw_becomes(shell.master, False), "the shell's own modes at the stop"
        shell.cue("bg")
        assert _state_becomes(runner, "S")
        shell.cue("fg")
        assert _raw_becomes(shell.master, True), "raw mode again once brought to the foreground"
        shell.go()
        assert shell.finish()["rc"] == 0
        assert _raw_becomes(shell.master, False), "the caller's modes back at the end"
    finally:
        shell.close()
