"""Ctrl-Z to a child lent the terminal (and a ``kill -TSTP`` of a runner holding the terminal for
its child, lent or ``--pty``), when the runner is not the shell's job but a member of it: a
wrapper in its process group (``sh -c '...; ...'``, ``make``) is the interactive shell's child.

A tmux pane runs a real interactive shell (bash; zsh and fish where installed); the test types
into it with ``send-keys`` as a user would and reads the screen (``capture-pane``), polled up to
a bound, never after a sleep. Each test also records ``stty -g`` before and after, so the
terminal's modes are proven back once the job is done.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import time

import pytest

from conftest import SAFETY_NET, cli_command, wait_for_event

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

# The child: reads a line from its terminal and says so, exit 3.
CHILD = 'import sys\nprint("READY", flush=True)\nprint("GOT", sys.stdin.readline().strip(), flush=True)\nsys.exit(3)\n'
PROMPT = "pk>"
# Each shell started interactive with no start-up files, its prompt PROMPT, and what it prints
# for a stopped job.
SHELLS = {
    "bash": (["bash", "--norc", "--noprofile", "-i"], "Stopped"),
    "zsh": (["zsh", "-f", "-i"], "suspended"),
    "fish": (["fish", "--no-config", "-i", "-C", f"function fish_prompt; printf '{PROMPT} '; end"], "has stopped"),
}


class ShellPane:
    """One tmux server (a private socket) whose one pane runs an interactive ``shell``."""

    def __init__(self, tmp_path, shell: str):
        self.jsonl = tmp_path / "run.jsonl"
        self._socket_dir = tempfile.mkdtemp(prefix="pk-tmux-")  # a socket path must stay short
        self._socket = os.path.join(self._socket_dir, "s")
        argv, self.stopped_word = SHELLS[shell]
        environment = [f"HOME={tmp_path}", "PATH=/usr/bin:/bin", "TERM=screen", f"PS1={PROMPT} "]
        size = ["-x", "150", "-y", "40"]
        self.tmux("new-session", "-d", "-s", "t", *size, "-c", str(tmp_path), "env", "-i", *environment, *argv)
        self.shell_pid = int(self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}"))
        self.runner: int | None = None

    def tmux(self, *args) -> str:
        proc = subprocess.run(
            ["tmux", "-S", self._socket, "-f", "/dev/null", *args], capture_output=True, timeout=SAFETY_NET
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.decode()

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "t")

    def wait_for_screen(self, *words: str, prompt: bool = False) -> None:
        """Until the screen shows ``words``, and with ``prompt`` the shell's prompt on its last line."""
        deadline = time.monotonic() + SAFETY_NET
        while True:
            screen = self.screen()
            lines = [line.rstrip() for line in screen.splitlines() if line.strip()]
            if all(word in screen for word in words) and (not prompt or (lines and lines[-1] == PROMPT)):
                return
            assert time.monotonic() < deadline, f"{words} {'and a prompt ' if prompt else ''}never shown: {screen}"
            time.sleep(0.02)

    def wait_for_prompt(self, *words: str) -> None:
        self.wait_for_screen(*words, prompt=True)

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-t", "t", "-l", line)
        self.tmux("send-keys", "-t", "t", "Enter")

    def held_for(self, child: int, mode: str) -> None:
        """Until the runner holds the terminal for the child: the child's group its foreground
        (lent), or for ``--pty`` the runner's group its foreground and the terminal raw (the keys
        taken; the shell's line editor takes it raw too, but in its own group)."""
        fd = os.open(self.tmux("display-message", "-p", "-t", "t", "#{pane_tty}").strip(), os.O_RDONLY | os.O_NOCTTY)
        try:
            deadline = time.monotonic() + SAFETY_NET
            while not self._holds(fd, child, mode):
                assert time.monotonic() < deadline, f"the terminal was never held for the child: {self.screen()}"
                time.sleep(0.02)
        finally:
            os.close(fd)

    def _holds(self, fd: int, child: int, mode: str) -> bool:
        foreground = _stat(self.shell_pid)[5]  # tpgid
        if mode != "--pty":
            return foreground == child
        assert self.runner is not None
        return foreground == _stat(self.runner)[2] and not termios.tcgetattr(fd)[3] & termios.ICANON

    def close(self) -> None:
        """The pane's end hangs up its terminal: a runner left waits on nothing, and is waited for."""
        subprocess.run(["tmux", "-S", self._socket, "kill-server"], capture_output=True, timeout=SAFETY_NET)
        shutil.rmtree(self._socket_dir, ignore_errors=True)
        deadline = time.monotonic() + SAFETY_NET
        while self.runner is not None and os.path.exists(f"/proc/{self.runner}"):
            assert time.monotonic() < deadline, "the runner outlived its terminal"
            time.sleep(0.02)


def _stat(pid: int) -> list[int]:
    """``/proc/<pid>/stat``'s numbers after the name: [1] its parent, [2] its group, [5] its
    terminal's foreground group."""
    with open(f"/proc/{pid}/stat") as handle:
        return [int(field) if field.lstrip("-").isdigit() else 0 for field in handle.read().rsplit(")", 1)[1].split()]


def _wrapped(tmp_path, wrapper: str, mode: str) -> str:
    """The command line typed: the runner under ``wrapper``, which says the runner's exit code."""
    (tmp_path / "child.py").write_text(CHILD)
    runner = [*cli_command(), "run", "--jsonl", str(tmp_path / "run.jsonl"), mode]
    script = shlex.join([*runner, "--", sys.executable, str(tmp_path / "child.py")]) + '; echo "rc=$?"'
    if wrapper == "sh":
        return f"sh -c {shlex.quote(script)}"
    (tmp_path / "Makefile").write_text("all:\n\t" + script.replace("$", "$$") + "\n")
    return f"make -s -f {shlex.quote(str(tmp_path / 'Makefile'))}"


def _stopped_and_brought_back(tmp_path, shell: str, wrapper: str, stop, mode: str = "--inherit-stdio") -> None:
    """The job typed, its child given the terminal (``mode``) and in its read, ``stop(pane)``:
    the shell says the job stopped and gives its prompt back; ``fg`` continues it, the child is
    given the terminal again, reads the keys typed, its exit code reaches the wrapper, and the
    terminal's modes are as they were."""
    if shutil.which(shell) is None or shutil.which(wrapper) is None:
        pytest.skip(f"{shell} or {wrapper} is not installed")
    pane = ShellPane(tmp_path, shell)
    try:
        pane.wait_for_prompt()
        pane.type(f"stty -g > before.txt; {_wrapped(tmp_path, wrapper, mode)}")
        child = wait_for_event(pane.jsonl, "run_started")["root_pid"]
        pane.runner = _stat(child)[1]
        pane.held_for(child, mode)
        pane.wait_for_screen("READY")  # in its read
        stop(pane)
        pane.wait_for_prompt(pane.stopped_word)
        pane.type("fg")
        pane.held_for(child, mode)
        pane.type("typed line")
        pane.wait_for_prompt("GOT typed line", "rc=3")
        pane.type("stty -g > after.txt")
        pane.wait_for_prompt("stty -g > after.txt")
        before, after = (tmp_path / "before.txt").read_text(), (tmp_path / "after.txt").read_text()
        assert before.strip() and before == after, (before, after)
    finally:
        pane.close()


@pytest.mark.parametrize(
    "shell, wrapper", [("bash", "sh"), ("bash", "make"), ("zsh", "sh"), ("fish", "sh")], ids=lambda word: word
)
def test_ctrl_z_stops_the_wrapper_the_runner_shares_its_group_with(tmp_path, shell, wrapper):
    """The runner judged whether it could stop as a job by itself: its parent, the wrapper, is in
    its group, so it left the child stopped holding the terminal, the wrapper and the shell
    waiting on it, the terminal frozen until a ``kill -CONT`` from elsewhere. Now the runner's
    whole group stops, and the shell takes its terminal back."""
    _stopped_and_brought_back(tmp_path, shell, wrapper, lambda pane: pane.tmux("send-keys", "-t", "t", "C-z"))


@pytest.mark.parametrize("mode", ["--inherit-stdio", "--pty"])
def test_a_kill_tstp_of_a_runner_holding_the_terminal_stops_the_wrapper_too(tmp_path, mode):
    """A ``kill -TSTP`` of the runner while it holds the terminal for its child stopped the
    runner and its tree alone: the wrapper ran on, the shell waited on it, and the terminal
    stayed with the stopped child's group (lent), or raw with the stopped runner's (``--pty``:
    no key, Ctrl-C neither, did anything). The runner's whole group now stops, as at a Ctrl-Z."""
    _stopped_and_brought_back(tmp_path, "bash", "sh", lambda pane: os.kill(pane.runner, signal.SIGTSTP), mode)
