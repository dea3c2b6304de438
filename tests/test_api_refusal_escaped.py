"""The API's refusal of an argument shows the value it quotes as the CLI's error line does
(``diagnostics.shown``): every terminal-unsafe character escaped. ``text.cut`` only shortens a
value, so an ESC given in ``timeout=`` (or a ``jsonl=`` path, a batch job's key, a ``bench``
count) reached the ValueError's text raw, and from there the traceback a caller's terminal
shows, where ``ESC [ 2 J`` clears the screen."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import run_cli

CLEAR = "\x1b[2J"

CALLS = {
    "run": f"processkit.run(['true'], timeout={CLEAR!r})",
    "bench": f"processkit.bench(['true'], runs={CLEAR!r})",
    "batch": f"processkit.batch([{{'args': ['true'], 'timeout': {CLEAR!r}}}], out='out')",
    "start": f"processkit.start(['true'], jsonl='fifo' + {CLEAR!r})",
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_refused_value_reaches_the_traceback_escaped(call, tmp_path):
    os.mkfifo(tmp_path / f"fifo{CLEAR}")
    died = subprocess.run(
        [sys.executable, "-c", f"import processkit\n{CALLS[call]}"], cwd=tmp_path, capture_output=True, timeout=60
    )
    assert died.returncode == 1, died.stderr
    assert b"\x1b" not in died.stderr, died.stderr
    last = died.stderr.decode().splitlines()[-1]
    assert last.startswith("ValueError: ") and "\\x1b[2J" in last, last


def test_the_api_and_the_cli_escape_a_value_alike(tmp_path):
    refused = run_cli("run", "--jsonl", "events.jsonl", "--timeout", CLEAR, "--", "true", cwd=tmp_path)
    assert refused.returncode == 100, refused.stderr
    line = refused.stderr.decode().strip().removeprefix("processkit-cli: ")
    died = subprocess.run(
        [sys.executable, "-c", f"import processkit\n{CALLS['run']}"], cwd=tmp_path, capture_output=True, timeout=60
    )
    assert died.stderr.decode().splitlines()[-1] == "ValueError: " + line.replace("--timeout", "timeout=")
