"""Job control on a real terminal: the runner stopped and continued as a shell's job (``kill
-TSTP``, ``kill -STOP``, then ``bg`` or ``fg``), the terminal lent to its child meanwhile, and
what a child given no terminal to read keeps of the runner's.

The host here plays bash: it runs the runner as a foreground job, and when the job stops it
takes the terminal back and waits for the test's cue: ``bg`` continues the job in the
background, ``fg`` gives it the terminal and continues it. Each test types or cues on files.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import termios
import textwrap
import time

import pytest

from conftest import SAFETY_NET, cli_command, wait_for_event, wait_for_file
from processkit.engine.terminal import SCREEN_RESET
from streams import read_until
from test_io_modes_terminal import Terminal, _runner_of, _state_becomes

PY = sys.executable

SHELL = textwrap.dedent(
    """
    import fcntl, json, os, signal, subprocess, sys, termios, time
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    signal.signal(signal.SIGINT, lambda *_: None)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a shell moves the terminal, as bash does
    result, cue, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    def job():
        os.setpgrp()
        os.tcsetpgrp(0, os.getpgrp())
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    runner = subprocess.Popen(argv, preexec_fn=job)
    foreground = True
    while True:
        _, status = os.waitpid(runner.pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            break
        os.tcsetpgrp(0, os.getpgrp())  # the job stopped: the shell takes the terminal back
        open(result + ".stopped", "w").close()
        while not os.path.exists(result + "." + cue):
            time.sleep(0.02)
        foreground = cue == "fg"
        if foreground:
            os.tcsetpgrp(0, runner.pid)
        os.killpg(runner.pid, signal.SIGCONT)
    holder = os.tcgetpgrp(0)
    os.tcsetpgrp(0, os.getpgrp())
    holder = "shell" if holder == os.getpgrp() else "runner" if holder == runner.pid else holder
    with open(result, "w") as handle:
        json.dump({"rc": os.waitstatus_to_exitcode(status), "holder": holder}, handle)
    """
)

# argv[1]: the report's path, a directory's files beside it the cues; argv[2]: what it does.
CHILD = textwrap.dedent(
    """
    import os, signal, sys, time, tty
    report, behaviour = sys.argv[1], sys.argv[2]
    if behaviour == "raw":  # a full-screen program quick to start: raw mode before any lend
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # (its background group may change modes)
        tty.setraw(0)
    open(report + ".ready", "w").close()
    while not os.path.exists(report + ".go"):
        if behaviour == "print":
            print("x", flush=True)
        time.sleep(0.2)
    if behaviour == "read":
        line = sys.stdin.readline()
        with open(report + ".tmp", "w") as handle:
            handle.write(line)
        os.rename(report + ".tmp", report)
    if behaviour == "raw":
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


class Shell(Terminal):
    HOST = SHELL
    CHILD = CHILD

    def cue(self, name: str) -> None:
        (self.dir / f"{self.result.name}.{name}").touch()

    def go(self) -> None:
        (self.dir / f"{self.report.name}.go").touch()

    def brought_back_reads(self) -> None:
        """``fg``: the child, continued and lent the terminal again, reads the line typed next,
        and the job ends 0 with the terminal back with the runner."""
        self.cue("fg")
        self.go()
        self.type(b"typed line\n")
        wait_for_file(self.report)
        assert self.report.read_text() == "typed line\n"
        assert self.finish() == {"rc": 0, "holder": "runner"}

    def stop_runner(self, signum: int) -> int:
        wait_for_event(self.jsonl, "run_started")
        wait_for_file(f"{self.report}.ready")
        runner = _runner_of(wait_for_event(self.jsonl, "run_started")["root_pid"])
        os.kill(runner, signum)
        wait_for_file(f"{self.result}.stopped")
        return runner


@pytest.fixture
def shell(tmp_path):
    term = Shell(tmp_path)
    yield term
    term.close()


@pytest.mark.parametrize("signum", [signal.SIGTSTP, signal.SIGSTOP], ids=["tstp", "stop"])
def test_a_runner_continued_in_the_background_leaves_the_terminal_to_the_shell(shell, signum):
    """After ``bg`` the terminal is the shell's: the runner, its child ended, made its own group
    the foreground again, and an interactive shell's next read failed (EIO): bash exited."""
    shell.run("--inherit-stdin", behaviour="wait", placement="bg")
    runner = shell.stop_runner(signum)
    shell.cue("bg")
    assert _state_becomes(runner, "S")
    shell.go()
    assert shell.finish() == {"rc": 0, "holder": "shell"}


def test_a_child_reading_after_the_runner_was_stopped_and_brought_back_gets_the_terminal(shell):
    """``fg`` gives the terminal to the runner's group, not the child's, and the child (stopped
    and continued with the runner) was stopped for good by its next read (SIGTTIN)."""
    shell.run("--inherit-stdin", behaviour="read", placement="fg")
    shell.stop_runner(signal.SIGTSTP)
    shell.brought_back_reads()


def test_time_stopped_is_not_idleness(shell):
    """A run stopped longer than its --idle-timeout went on after ``fg``: the idle deadline
    counts from the continue, not from the child's last output before the stop."""
    shell.run("--idle-timeout", "2s", behaviour="print", placement="fg")
    shell.stop_runner(signal.SIGTSTP)
    time.sleep(3)  # stopped for longer than the idle window (the point of the test)
    os.set_blocking(shell.master, False)
    while _echoed(shell.master):
        pass  # what the runner echoed before its stop
    shell.cue("fg")
    # echoed after the continue: the runner's overdue idle check has run
    read_until(shell.master, b"x", "nothing echoed after the continue", 60)
    shell.go()
    result = shell.finish()
    assert result["rc"] == 0, [e["event"] for e in map(json.loads, shell.jsonl.read_text().splitlines())]


class Late(Terminal):
    """The plain host (``fg-later``: a background job brought to the foreground on cue)."""

    CHILD = CHILD


def test_the_modes_put_back_after_a_kill_are_those_from_before_the_spawn(tmp_path, monkeypatch):
    """The child set raw mode before the terminal was lent (its runner was a background job
    until ``fg``), and the modes the lend read, then put back after the kill, were raw. The
    screen's modes a killed child could not undo are undone too (a hidden cursor: none were)."""
    monkeypatch.setenv("TERM", "xterm")
    late = Late(tmp_path)
    try:
        before = termios.tcgetattr(late.master)
        late.run("--inherit-stdio", behaviour="raw", placement="fg-later")
        started = wait_for_event(late.jsonl, "run_started")
        wait_for_file(f"{late.report}.ready")
        assert termios.tcgetattr(late.master) != before
        (tmp_path / "host.json.fg").touch()
        deadline = time.monotonic() + 60
        while late.foreground_group() != started["root_pid"] and time.monotonic() < deadline:
            time.sleep(0.02)  # lent once the runner finds itself the foreground job
        (tmp_path / "child.json.go").touch()
        assert late.finish() == {"rc": 137, "foreground_is_host": True}
        assert termios.tcgetattr(late.master) == before
        os.set_blocking(late.master, False)
        written = b""
        while chunk := _echoed(late.master):  # the terminal hung up: EIO once it is read
            written += chunk
        assert SCREEN_RESET in written and b"\x1b[?1004l\x1b[?1005l" in written, written  # focus, UTF-8 mouse
    finally:
        late.close()


def _echoed(master: int) -> bytes:
    try:
        return os.read(master, 65536)
    except OSError:  # nothing yet (EAGAIN), or nothing more: every holder is gone (EIO)
        return b""


API = textwrap.dedent(
    """
    import errno, os, sys, processkit
    report, path = sys.argv[1], sys.argv[2]
    child = "import errno, os, sys\\ntry:\\n os.close(os.open('/dev/tty', os.O_RDWR)); r = 'opened'\\n"
    child += "except OSError as e:\\n r = errno.errorcode[e.errno]\\nopen(sys.argv[1], 'w').write(r)"
    with open(path, "w") as out:
        processkit.run([sys.executable, "-c", child, report], stdout=out, timeout=60)
    """
)


def test_an_api_child_given_a_file_for_stdout_and_no_stdin_has_no_terminal(shell, tmp_path):
    """Its given stdout kept it the terminal, and its /dev/tty read stopped it (SIGTTIN)."""
    shell.start_host("none", [PY, "-c", API, str(shell.report), str(tmp_path / "out")])
    assert shell.finish()["rc"] == 0
    assert shell.report.read_text() == "ENXIO"


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(child) for child in handle.read().split()]


def test_a_ctrl_z_while_a_process_group_child_execs_stops_it_too(shell, tmp_path, monkeypatch):
    """The process group was known only once the exec was reported: a SIGTSTP passed on to the
    tree in that window missed the child, which ran on behind the stopped runner."""
    pytest.importorskip("processkit._native")
    if os.environ.get("PROCESSKIT_SPAWN") == "python":
        pytest.skip("Popen's spawn waits for the exec: there is no such window")
    from test_spawn_no_wait import HeldExec

    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    program, marker = tmp_path / "held", tmp_path / "ran"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(0o755)
    held = HeldExec(program)
    try:
        command = [*cli_command(), "run", "--timeout", "20s", "--jsonl", str(shell.jsonl), "--", str(program)]
        shell.start_host("fg", command)
        held.wait_for_the_exec()
        (runner,) = _children(shell.host.pid)
        os.kill(runner, signal.SIGTSTP)
        wait_for_file(f"{shell.result}.stopped")
        (child,) = _children(runner)
    finally:
        held.release()  # the exec goes on: the stop it was sent takes effect as it returns
    assert _state_becomes(child, "T") and not marker.exists()
    shell.cue("fg")
    assert shell.finish() == {"rc": 0, "holder": "runner"}
    assert marker.exists()


def test_a_stop_of_a_pty_runner_stops_its_tree_and_the_continue_continues_it(shell):
    """A ``--pty`` child leads its own session, so its group is orphaned: the SIGTSTP the runner
    passed on was discarded by the kernel (POSIX: an orphaned group is not stopped by the
    terminal's stop signals) and the tree ran on behind the "stopped" job."""
    shell.run("--pty", behaviour="wait", placement="fg")
    child = wait_for_event(shell.jsonl, "run_started")["root_pid"]
    shell.stop_runner(signal.SIGTSTP)
    assert _state_becomes(child, "T"), "the pty's tree runs on behind the stopped runner"
    shell.cue("fg")
    assert _state_becomes(child, "S"), "the continue continues the tree"
    shell.go()
    assert shell.finish()["rc"] == 0


# The shell again, its cues numbered: the Nth stop waits for ``result.cueN`` ("fg" or "bg").
NUMBERED = SHELL.replace(
    'open(result + ".stopped", "w").close()\n    while not os.path.exists(result + "." + cue):\n        time.sleep(0.02)\n    foreground = cue == "fg"',
    'stops = globals().get("stops", 0) + 1\n    globals()["stops"] = stops\n    open(result + ".stopped" + str(stops), "w").close()\n'
    '    while not os.path.exists(result + ".cue" + str(stops)):\n        time.sleep(0.02)\n'
    '    cue = open(result + ".cue" + str(stops)).read()\n    foreground = cue == "fg"',
)


class Numbered(Shell):
    HOST = NUMBERED

    def cue_nth(self, n: int, what: str) -> None:
        (self.dir / f"{self.result.name}.cue{n}").write_text(what)

    def tostop(self) -> None:
        """``tostop`` on the terminal: a background job's write raises SIGTTOU."""
        modes = termios.tcgetattr(self.master)
        modes[3] |= termios.TOSTOP  # the slave's modes, set through the master
        termios.tcsetattr(self.master, termios.TCSANOW, modes)

    def stopped_again_in_the_background(self) -> tuple[int, int]:
        """The printing run's runner stopped (Ctrl-Z), what it wrote so far read, continued with
        ``bg``, and stopped again by its next write there: (runner, child)."""
        os.set_blocking(self.master, False)
        child = wait_for_event(self.jsonl, "run_started")["root_pid"]
        runner = _runner_of(child)
        wait_for_file(f"{self.report}.ready")
        os.kill(runner, signal.SIGTSTP)
        wait_for_file(f"{self.result}.stopped1")
        while _echoed(self.master):
            pass  # what was written before the stop
        self.cue_nth(1, "bg")
        wait_for_file(f"{self.result}.stopped2")  # its next write, in the background
        return runner, child


def test_a_background_runner_stopped_by_its_echo_on_a_tostop_terminal_stops_its_tree_too(tmp_path):
    """``bg`` on a terminal with ``tostop``: the runner's next echo stops it (SIGTTOU), as any
    background job's write does. It stopped alone while its child ran on behind the "stopped"
    job; now its tree stops with it, and ``fg`` continues both."""
    assert "stops" in NUMBERED, "the numbered shell was made from the shell's script"
    shell = Numbered(tmp_path)
    try:
        shell.tostop()
        shell.run(behaviour="print", placement="unused")
        runner, child = shell.stopped_again_in_the_background()  # by its next echo
        assert _state_becomes(runner, "T")
        assert _state_becomes(child, "T"), "the child runs on behind the runner its echo stopped"
        shell.cue_nth(2, "fg")
        assert _state_becomes(child, "S")
        shell.go()
        assert shell.finish()["rc"] == 0
    finally:
        shell.close()


# The shell again, putting its own terminal modes back when a job stops, as bash does.
BASHLIKE = SHELL.replace(
    "runner = subprocess.Popen(argv, preexec_fn=job)",
    "shell_modes = termios.tcgetattr(0)\nrunner = subprocess.Popen(argv, preexec_fn=job)",
).replace(
    "os.tcsetpgrp(0, os.getpgrp())  # the job stopped: the shell takes the terminal back",
    "os.tcsetpgrp(0, os.getpgrp())  # the job stopped: the shell takes the terminal back\n"
    "    termios.tcsetattr(0, termios.TCSANOW, shell_modes)",
)


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


def _raw_becomes(master: int, raw: bool, timeout: float = SAFETY_NET) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (not termios.tcgetattr(master)[3] & termios.ICANON) == raw:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("cues", [("fg",), ("bg", "fg")], ids=["fg", "bg-then-fg"])
def test_a_pty_runner_brought_back_with_fg_relays_keys_in_raw_mode_again(tmp_path, cues):
    """The shell put its own modes back at the stop and ``fg`` gives the job none: the caller's
    keys were read a line at a time and Ctrl-C cancelled the run instead of reaching the child.
    After ``bg`` (the runner a background job leaves the shell's modes alone) the ``fg``
    continued a runner already running, and nothing put raw mode back."""
    assert "TCSANOW, shell_modes" in BASHLIKE, "the bash-like shell was made from the shell's script"
    assert 'result + ".fg"' in BG_THEN_FG, "the bg-then-fg shell was made from the bash-like one"
    shell = BgThenFg(tmp_path)
    try:
        shell.run("--pty", behaviour="wait", placement=cues[0])
        wait_for_event(shell.jsonl, "run_started")
        assert _raw_becomes(shell.master, True), "the runner relays keys in raw mode"
        runner = shell.stop_runner(signal.SIGTSTP)
        assert _raw_becomes(shell.master, False), "the shell's own modes at the stop"
        for cue in cues:
            shell.cue(cue)
            if cue == "bg":
                assert _state_becomes(runner, "S")
        assert _raw_becomes(shell.master, True), "raw mode again once continued in the foreground"
        shell.go()
        assert shell.finish()["rc"] == 0
        assert _raw_becomes(shell.master, False), "the caller's modes back at the end"
    finally:
        shell.close()
