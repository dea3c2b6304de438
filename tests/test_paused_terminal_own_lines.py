"""A terminal paused with Ctrl-S past the echo's stall loses the child's live echo (the
reference's pump bound), never the lines the reference or hyperfine write too: ``bench``'s
printout, ``run``'s error line wait in a blocking write and reach the terminal after Ctrl-Q
(``writeall.write_own``), as from ``cat`` or hyperfine; processkit's own warnings keep their
bound, so a terminal nobody reads never holds the runner. Process-level on a real pty:
^S before the run, ^Q once the runner ended or waits in a write to the terminal; the echo's
stall made short (``teardown.ECHO_STALL_SECONDS``)."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import SAFETY_NET, patched_cli, read_events
from streams import seconds_between, waits_in_write

STALL = 0.3  # the echo's stall, patched


def _on_paused_terminal(
    *args: str,
    stderr: int | None = None,
    stall: float = STALL,
    then=None,
    paused: bool = True,
    ctrl_q: bool = True,
    cwd: Path | None = None,
) -> tuple[int, bytes]:
    """``processkit-cli ARGS`` (the echo's stall ``stall``) with stdout and stderr (unless
    ``stderr`` is given) on a pty paused by ^S (unless not ``paused``), in ``cwd``:
    ``then(process)`` if given, and ^Q once it ended or waits in a write to either (the echo is
    given up or cut by then: only the runner's own lines write there after it); without
    ``ctrl_q`` the terminal is never read nor let go while it runs (a hang fails at the safety
    net). Its exit code and all the terminal showed."""
    master, slave = pty.openpty()
    try:
        if paused:
            os.write(master, b"\x13")  # ^S: the terminal's output stopped (IXON)
        process = subprocess.Popen(
            patched_cli(
                "teardown", "ECHO_STALL_SECONDS", repr(stall), "processkit.writeall", "OWN_STALL_SECONDS", repr(STALL)
            )
            + list(args),
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave if stderr is None else stderr,
            cwd=cwd,
        )
        os.close(slave)
        try:
            if then is not None:
                then(process)
            if ctrl_q:
                waits_in_write(process, 1, 2)  # or ended
                os.write(master, b"\x11")  # ^Q
            process.wait(timeout=SAFETY_NET)  # without ctrl_q a net only: it ends one bound later
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
        shown = bytearray()
        try:
            while chunk := os.read(master, 1 << 16):
                shown += chunk
        except OSError:  # EIO: every slave end closed, all read
            pass
    finally:
        os.close(master)
    return process.returncode, bytes(shown)


def test_benchs_printout_reaches_a_terminal_after_ctrl_q():
    code, shown = _on_paused_terminal("bench", "--runs", "2", "--show-output", "echo hi")
    assert code == 0, shown
    assert b"Benchmark 1: echo hi" in shown and b"Time (mean" in shown, shown


def test_benchs_later_runs_still_wait_on_a_terminal_paused_with_ctrl_s(tmp_path):
    """A terminal given up once (paused by ^S past a run's stall) is not given up for good: its
    reader lets it go again, so each later run's echo there waits its own stall. No printout
    (``--style none``): its header, hyperfine's, is written before the runs and would wait for ^Q
    as the printout does (test_benchs_printout_reaches_a_terminal_after_ctrl_q)."""
    streams = tmp_path / "streams"
    argv = ("bench", "--runs", "2", "--style", "none", "--show-output", "--jsonl-dir", str(streams), "echo hi")
    code, shown = _on_paused_terminal(*argv, stderr=subprocess.DEVNULL)
    assert code == 0, shown
    drains = [seconds_between(read_events(path), "root_exited", "runner_exit") for path in streams.iterdir()]
    # Each waited its stall: the events' timestamps are in whole milliseconds, each rounded, so a
    # wait of exactly STALL may read up to 2 ms short; 0.9 leaves that, and no wait of 0 passes.
    assert len(drains) == 2 and min(drains) >= STALL * 0.9, drains


def test_runs_error_line_reaches_a_terminal_after_ctrl_q(tmp_path):
    jsonl = str(tmp_path / "run.jsonl")
    code, shown = _on_paused_terminal(
        "run", "--jsonl", jsonl, "--timeout", "500ms", "--", "sh", "-c", "echo hi; exec sleep 60"
    )
    assert code == 106, shown
    assert b"run timed out after 500ms" in shown, shown


def test_a_pty_runs_error_line_reaches_a_terminal_after_ctrl_q(tmp_path):
    jsonl = str(tmp_path / "run.jsonl")
    code, shown = _on_paused_terminal(
        "run", "--jsonl", jsonl, "--pty", "--timeout", "500ms", "--", "sh", "-c", "echo hi; exec sleep 60"
    )
    assert code == 106, shown
    assert b"run timed out after 500ms" in shown, shown


def test_a_terminal_paused_by_ctrl_s_gets_the_runners_last_line(tmp_path):
    """No echo given up (nothing echoed): the error line waits for ^Q as a blocking write does."""
    jsonl = str(tmp_path / "run.jsonl")
    code, shown = _on_paused_terminal("run", "--jsonl", jsonl, "--timeout", "500ms", "--", "sleep", "60")
    assert code == 106, shown
    assert b"run timed out after 500ms" in shown, shown


def test_a_terminal_nobody_reads_never_holds_a_run_that_succeeded(tmp_path):
    """A pty whose other end is held open but never read (a script that waits without reading,
    a frozen emulator) looks as a paused one does: the echo is given up after its stall, and the
    warning saying so, processkit's own (the reference prints none), waits one bound at most."""
    argv = ("run", "--jsonl", str(tmp_path / "run.jsonl"), "--", "sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a")
    assert _on_paused_terminal(*argv, paused=False, ctrl_q=False, cwd=tmp_path)[0] == 0


@pytest.mark.parametrize("shown", ["echo hi; ", ""], ids=["echo_cut", "nothing_echoed"])
def test_a_stop_on_a_paused_terminal_never_holds_the_runner(tmp_path, shown):
    """A SIGTERM while the terminal is paused: the child's echo waiting there is given up, and the
    runner's lines there, its cancel line too, wait one bound at most (Ctrl-C typed there would
    have restarted the output: a stop signal from elsewhere finds nobody to type ^Q). Where the
    child had echoed nothing, nothing doubted the terminal: the cancel line waited for ^Q."""

    def stop(process: subprocess.Popen) -> None:
        deadline = time.monotonic() + SAFETY_NET
        while not (tmp_path / "echoed").exists():
            assert process.poll() is None and time.monotonic() < deadline, "never wrote"
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)

    argv = ("run", "--jsonl", str(tmp_path / "run.jsonl"), "--", "sh", "-c", shown + ": > echoed; exec sleep 60")
    assert _on_paused_terminal(*argv, ctrl_q=False, cwd=tmp_path, then=stop)[0] == 107


def test_a_batch_stopped_on_a_paused_terminal_ends(tmp_path):
    """A batch stopped while its terminal is paused: its lines after the stop are bounded, its
    later warnings (the trace that cannot be written) too, so it ends (docs/batch.md)."""

    def stop(process: subprocess.Popen) -> None:
        deadline = time.monotonic() + SAFETY_NET
        while not all((tmp_path / f"started{job}").exists() for job in "ab"):
            assert process.poll() is None and time.monotonic() < deadline, "the jobs never started"
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)

    script = "echo {}; : > started{}; exec sleep 60"
    argv = ("batch", "--out", "bo", "--trace", "/dev/full", "--jobs", "2", "--", "sh", "-c", script, ":::", "a", "b")
    assert _on_paused_terminal(*argv, ctrl_q=False, cwd=tmp_path, then=stop)[0] == 107
