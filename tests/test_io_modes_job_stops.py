"""Job control on a real terminal, continued from tests/test_io_modes_job_control.py (its shells):
a runner whose capture file is the terminal, stopped in the background by ``tostop``."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from conftest import wait_for_event
from test_io_modes_job_control import Numbered, _echoed
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
