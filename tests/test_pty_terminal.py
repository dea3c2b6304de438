"""``run --pty`` under a real terminal: a tmux pane runs the runner in its foreground, the test
types into the pane with ``send-keys`` and resizes its window, as a user would.

The pane's script records ``stty -g`` before and after the run and the runner's exit code, so
every test also proves the caller's terminal mode came back, whatever ended the run.
Synchronisation is on the child's report file and the JSONL, never on fixed sleeps.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import textwrap
import time

import pytest

from conftest import SAFETY_NET, cli_command, run_cli, wait_for_event
from streams import check_stream, one

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

# The child: appends one JSON line per fact to argv[1]; argv[2] says what it does.
CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, time
    report, behaviour = sys.argv[1], sys.argv[2]
    def tell(**facts):
        with open(report, "a") as handle:
            handle.write(json.dumps(facts) + "\\n")
    signal.signal(signal.SIGWINCH, lambda *_: tell(size=list(os.get_terminal_size(0))))
    tell(ready=True, size=list(os.get_terminal_size(0)), tty=os.isatty(0))
    if behaviour == "readline":
        tell(line=sys.stdin.readline())
    elif behaviour == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif behaviour == "screen":  # a full-screen program's modes: hidden cursor, mouse, cursor keys
        sys.stdout.write("\\x1b[?25l\\x1b[?1000h\\x1b[?1h")
        sys.stdout.flush()
        tell(screen=True)
        while True:
            time.sleep(0.05)
    else:
        while True:
            time.sleep(0.05)
    """
)

SCRIPT = """\
cd {dir}
stty -g > before.txt
{command}
echo $? > rc.tmp
stty -g > after.txt
mv rc.tmp rc.txt
"""


class Pane:
    """One tmux server (a private socket) with one window running SCRIPT."""

    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.jsonl = tmp_path / "run.jsonl"
        self.report = tmp_path / "report.jsonl"
        self._socket_dir = tempfile.mkdtemp(prefix="pk-tmux-")  # a socket path must stay short
        self._socket = os.path.join(self._socket_dir, "s")
        self.raw_keyboard = False  # set by start: only a ``run --pty`` takes the pane's terminal raw

    def tmux(self, *args) -> str:
        proc = subprocess.run(
            ["tmux", "-S", self._socket, "-f", "/dev/null", *args], capture_output=True, timeout=SAFETY_NET
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.decode()

    def start(self, *flags, behaviour: str, run_id: str = "pty-terminal", hold: bool = False) -> None:
        """``hold``: the pane's shell waits for a line after the run, its screen as the run left it."""
        (self.dir / "child.py").write_text(CHILD)
        command = [*cli_command(), "run", "--pty", "--run-id", run_id, "--jsonl", str(self.jsonl), *flags]
        command += ["--", sys.executable, str(self.dir / "child.py"), str(self.report), behaviour]
        self.raw_keyboard = True
        script = self.dir / "pane.sh"
        script.write_text(
            SCRIPT.format(dir=shlex.quote(str(self.dir)), command=shlex.join(command)) + ("read held\n" if hold else "")
        )
        self.tmux("new-session", "-d", "-s", "t", "-x", "100", "-y", "30", f"sh {shlex.quote(str(script))}")

    def facts(self) -> list[dict]:
        try:
            return [json.loads(line) for line in self.report.read_text().splitlines()]
        except FileNotFoundError:
            return []

    def wait_for_fact(self, key: str, timeout: float = SAFETY_NET) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [fact for fact in self.facts() if key in fact]
            if found:
                return found[-1]
            time.sleep(0.02)
        raise AssertionError(f"the child reported no {key!r} within {timeout}s: {self.facts()}")

    def keys(self, *keys: str) -> None:
        """Typed once a ``run --pty`` relays the pane's keys to the child (``wait_for_keyboard``);
        at once for a pane another command runs (``bench`` never takes the terminal raw)."""
        if self.raw_keyboard:
            self.wait_for_keyboard()
        self.tmux("send-keys", "-t", "t", *keys)

    def wait_for_keyboard(self, timeout: float = SAFETY_NET) -> None:
        """Until the runner has put the pane's terminal in raw mode, which it does just after the
        child's spawn, possibly after the child said it was ready: a Ctrl-C typed before goes
        through the terminal's line discipline and interrupts the runner, not the child."""
        fd = os.open(self.tmux("display-message", "-p", "-t", "t", "#{pane_tty}").strip(), os.O_RDONLY | os.O_NOCTTY)
        try:
            deadline = time.monotonic() + timeout
            while termios.tcgetattr(fd)[3] & termios.ICANON:
                assert time.monotonic() < deadline, "the runner never took the pane's terminal as the child's keyboard"
                time.sleep(0.02)
        finally:
            os.close(fd)

    def finish(self, timeout: float = SAFETY_NET) -> int:
        """The runner's exit code, once the pane's script is done; asserts stty -g held."""
        done = self.dir / "rc.txt"
        deadline = time.monotonic() + timeout
        while not done.exists():
            assert time.monotonic() < deadline, f"the pane did not finish: {self.tmux('capture-pane', '-p', '-t', 't')}"
            time.sleep(0.02)
        before, after = (self.dir / "before.txt").read_text(), (self.dir / "after.txt").read_text()
        assert before.strip() and before == after, (before, after)
        return int(done.read_text())

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self._socket, "kill-server"], capture_output=True, timeout=SAFETY_NET)
        shutil.rmtree(self._socket_dir, ignore_errors=True)


@pytest.fixture
def pane(tmp_path):
    window = Pane(tmp_path)
    yield window
    window.close()


def test_typing_reaches_the_child_and_the_terminal_mode_comes_back(pane, spawn_backend):
    pane.start(behaviour="readline")
    pane.tmux("set-option", "-w", "-t", "t", "remain-on-exit", "on")  # the screen outlives the script
    ready = pane.wait_for_fact("ready")
    assert ready["tty"] is True
    assert ready["size"] == [100, 30]  # the caller's terminal size, not the 80x24 default
    pane.keys("hello pty", "Enter")
    assert pane.wait_for_fact("line")["line"] == "hello pty\n"
    assert pane.finish() == 0
    check_stream(pane.jsonl, 0)
    # A terminal stdin is warned about by no line before the echo (the screen and its history).
    deadline = time.monotonic() + SAFETY_NET
    while "hello pty" not in (screen := pane.tmux("capture-pane", "-p", "-S", "-", "-t", "t")):
        assert time.monotonic() < deadline, screen
        time.sleep(0.02)
    assert "warning" not in screen, screen


def test_ctrl_c_ends_the_child_with_its_signal_code(pane):
    pane.start(behaviour="sleep")
    pane.wait_for_fact("ready")
    pane.keys("C-c")
    assert pane.finish() == 130
    events = check_stream(pane.jsonl, 130)
    exited = one(events, "root_exited")
    assert (exited["outcome"], exited["signal"]) == ("signalled", 2)
    assert "cancelled" not in [e["event"] for e in events]  # the child's own exit, not the runner's


def test_a_resize_reaches_the_child(pane):
    pane.start(behaviour="sleep")
    pane.wait_for_fact("ready")
    pane.tmux("resize-window", "-t", "t", "-x", "91", "-y", "22")
    deadline = time.monotonic() + 60
    while [91, 22] not in [fact.get("size") for fact in pane.facts()]:
        assert time.monotonic() < deadline, pane.facts()
        time.sleep(0.02)
    pane.keys("C-c")
    assert pane.finish() == 130


def test_an_explicit_size_is_kept(pane):
    pane.start("--pty-size", "120x40", behaviour="readline")
    assert pane.wait_for_fact("ready")["size"] == [120, 40]
    pane.keys("Enter")
    assert pane.finish() == 0


def test_terminal_mode_is_restored_after_a_timeout(pane):
    pane.start("--timeout", "1s", behaviour="sleep")
    assert pane.finish() == 106
    assert one(check_stream(pane.jsonl, 106), "timeout")["reason"] == "overall"


def test_terminal_mode_is_restored_after_a_control_plane_cancel(pane):
    pane.start(behaviour="sleep", run_id="pty-cancel")
    pane.wait_for_fact("ready")
    wait_for_event(pane.jsonl, "run_started")
    proc = run_cli("cancel", "--run-id", "pty-cancel")
    assert proc.returncode == 0, proc.stderr
    assert pane.finish() == 108


def test_terminal_mode_is_restored_after_a_signal_to_the_runner(pane):
    pane.start(behaviour="sleep")
    pane.wait_for_fact("ready")
    root = wait_for_event(pane.jsonl, "run_started")["root_pid"]
    with open(f"/proc/{root}/stat") as handle:
        runner = int(handle.read().rsplit(")", 1)[1].split()[1])  # the child's parent
    os.kill(runner, signal.SIGTERM)
    assert pane.finish() == 107
    assert one(check_stream(pane.jsonl, 107), "cancelled")["source"] == "sigterm"


def test_terminal_mode_is_restored_after_the_child_crashes(pane):
    pane.start(behaviour="crash")
    assert pane.finish() == 139


def test_a_killed_full_screen_child_leaves_the_cursor_shown_and_the_mouse_off(pane):
    """Killed before it could undo them (a control-plane kill, or any ending with no ``--grace``),
    a full-screen child left the caller's terminal with its cursor hidden and mouse reporting on
    (each click typed escapes into the shell): the stty modes came back, the screen's did not."""
    pane.start(behaviour="screen", run_id="pty-screen", hold=True)
    pane.wait_for_fact("screen")
    wait_for_event(pane.jsonl, "run_started")
    modes = "#{cursor_flag} #{mouse_any_flag} #{keypad_cursor_flag}"
    deadline = time.monotonic() + SAFETY_NET
    while pane.tmux("display-message", "-p", "-t", "t", modes).split() != ["0", "1", "1"]:
        assert time.monotonic() < deadline, "the child's modes never reached the pane"
        time.sleep(0.02)
    proc = run_cli("kill", "--run-id", "pty-screen")
    assert proc.returncode == 0, proc.stderr
    assert pane.finish() == 109
    deadline = time.monotonic() + SAFETY_NET
    while pane.tmux("display-message", "-p", "-t", "t", modes).split() != ["1", "0", "0"]:
        assert time.monotonic() < deadline, "the child's modes were never undone"
        time.sleep(0.02)  # the pane reads the runner's last bytes on its own time
