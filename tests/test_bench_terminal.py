"""``bench`` on a real terminal (a tmux pane): the progress lines while it runs, the summary
alone once done, and Ctrl-C. The third timed run waits for a file the test creates, so the pane
is read while the benchmark is known to be mid-way, never after a sleep."""

from __future__ import annotations

import os
import select
import shlex
import signal
import time

import pytest

from conftest import SAFETY_NET, cli_command, patched_cli, wait_for_file
from streams import wait_until
from test_pty_terminal import Pane, pytestmark  # noqa: F401 - skipped without tmux

# Counts its runs in ./n; the third one announces itself in ./third and waits for ./go.
HOLDS_THIRD = (
    "n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; "
    "if [ $n -eq 3 ]; then touch third; while [ ! -e go ]; do sleep 0.01; done; fi"
)


@pytest.fixture
def pane(tmp_path):
    window = Pane(tmp_path)
    yield window
    window.close()


def start(pane: Pane, *flags: str, shell: str = HOLDS_THIRD, cli: list[str] | None = None) -> None:
    command = [*(cli or cli_command()), "bench", *flags, shell]
    script = pane.dir / "pane.sh"  # its shell survives Ctrl-C (a trap), so the pane reports bench's code
    script.write_text(
        f"cd {shlex.quote(str(pane.dir))}\ntrap : INT\nstty -g > before.txt\n{shlex.join(command)}\n"
        "echo $? > rc.tmp\nstty -g > after.txt\nmv rc.tmp rc.txt\nexec cat\n"  # the pane stays to be read
    )
    pane.tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "30", f"sh {shlex.quote(str(script))}")


def screen(pane: Pane) -> str:
    return pane.tmux("capture-pane", "-p", "-t", "t")


def wait_for_screen(pane: Pane, *texts: str, timeout: float = SAFETY_NET) -> str:
    """The first screen that holds every one of ``texts``."""
    deadline = time.monotonic() + timeout
    shown = screen(pane)
    while not all(text in shown for text in texts):
        assert time.monotonic() < deadline, shown
        time.sleep(0.02)
        shown = screen(pane)
    return shown


def test_a_progress_line_while_running_and_the_summary_after(pane):
    start(pane, "--runs", "5")
    wait_for_file(pane.dir / "third")
    shown = wait_for_screen(pane, "2/5")  # drawn after the second run, before the third ends
    line = next(line for line in shown.splitlines() if "2/5" in line)
    assert "[" in line and "#" in line and "mean" in line and "ETA" in line
    (pane.dir / "go").touch()
    assert pane.finish() == 0
    final = screen(pane)
    assert "Benchmark 1:" in final and "5 runs" in final
    assert "/5" not in final  # the progress line was erased before the summary


def test_ctrl_c_stops_the_benchmark_and_gives_the_terminal_back(pane):
    start(pane, "--runs", "5")
    wait_for_file(pane.dir / "third")
    pane.keys("C-c")
    assert pane.finish() == 130  # died by SIGINT, as hyperfine does: the shell's $? is 128 + 2
    assert "stopped" in screen(pane)


def test_more_commands_than_rows_share_one_progress_line(pane):
    start(pane, "--runs", "1", "--parameter-scan", "k", "1", "40", shell=": {k}; " + HOLDS_THIRD)
    wait_for_file(pane.dir / "third")
    shown = wait_for_screen(pane, "elapsed")  # the shared line shows the command that is running
    assert len([line for line in shown.splitlines() if "/1" in line]) == 1  # one shared line, not 40
    (pane.dir / "go").touch()
    assert pane.finish() == 0
    assert "Benchmark 40:" in pane.tmux("capture-pane", "-p", "-S", "-400", "-t", "t")


def test_progress_shows_from_the_first_moment(pane):
    """A long first run: its line is there with the initial estimate, and its elapsed time
    grows while it runs (nothing was drawn before it ended)."""
    start(pane, "--runs", "3", shell="if [ ! -e go ]; then touch first; while [ ! -e go ]; do sleep 0.01; done; fi")
    wait_for_file(pane.dir / "first")
    shown = wait_for_screen(pane, "elapsed")
    line = next(line for line in shown.splitlines() if "elapsed" in line)
    assert "0/3 (estimate)" in line and "(run 1: " in line
    later = wait_for_screen(pane, "(run 1: 1.")  # the same run, redrawn as it goes on
    assert "0/3" in later
    (pane.dir / "go").touch()
    assert pane.finish() == 0
    assert "3 runs" in screen(pane) and "elapsed" not in screen(pane)


def test_in_sequential_order_a_commands_block_is_printed_once_it_is_over(pane):
    """The first command's block is on the screen while the second runs, its progress line gone
    from below it, and the second's ``Benchmark 2:`` line above the second's progress line."""
    start(pane, "--order", "sequential", "--runs", "5", "true")
    wait_for_file(pane.dir / "third")
    shown = wait_for_screen(pane, "Benchmark 1: true", "2/5")
    lines = shown.splitlines()
    bars = [at for at, line in enumerate(lines) if "/5" in line]
    headers = [at for at, line in enumerate(lines) if line.startswith("Benchmark 2: ")]
    assert "5 runs" in shown and len(bars) == 1 and len(headers) == 1 and headers[0] < bars[0], shown
    (pane.dir / "go").touch()
    assert pane.finish() == 0
    assert "Benchmark 2:" in screen(pane) and "/5" not in screen(pane)


def test_a_failing_second_command_leaves_the_first_ones_block_on_the_terminal(pane):
    start(pane, "--order", "sequential", "--runs", "3", "true", shell="false")
    assert pane.finish() == 118
    final = screen(pane)
    assert "Benchmark 1: true" in final and "3 runs" in final and "exited with 1" in final
    assert "/3" not in final


def paused(pane: Pane) -> None:
    """Until the pane's terminal takes no byte more: its output stopped by the ^S typed there."""
    tty = pane.tmux("display-message", "-p", "-t", "t", "#{pane_tty}").strip()
    fd = os.open(tty, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        wait_until(lambda: not select.select([], [fd], [], 0)[1], what="the pane's output stopped by ^S")
    finally:
        os.close(fd)


def test_a_stop_from_elsewhere_on_a_terminal_paused_with_ctrl_s_ends_the_benchmark(pane):
    """``kill -TERM`` from another process while the pane is paused (^S): the stop's line, and the
    export of the command done (``-``: stdout), waited in a blocking write on the paused terminal
    until a ^Q nobody was there to type (hyperfine dies at once); now a stop's lines wait at most
    the bound of processkit's own (made short)."""
    bound = patched_cli("processkit.writeall", "OWN_STALL_SECONDS", "0.3")
    says_pid = HOLDS_THIRD.replace("touch third", "echo $PPID > third.tmp; mv third.tmp third")  # bench's pid
    start(
        pane,
        "--style",
        "basic",
        "--order",
        "sequential",
        "--runs",
        "5",
        "--export-json",
        "-",
        "true",
        shell=says_pid,
        cli=bound,
    )
    wait_for_file(pane.dir / "third")
    pane.keys("C-s")
    paused(pane)
    os.kill(int((pane.dir / "third").read_text()), signal.SIGTERM)
    assert pane.finish() == 107
