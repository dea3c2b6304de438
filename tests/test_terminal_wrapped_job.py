"""Ctrl-Z to a child lent the terminal when the runner is not the shell's job but a member of it:
a wrapper in its process group (``sh -c '...; ...'``, ``make``) is the interactive shell's child.
And where the runner's group is not stopped: a ``kill -TSTP`` from a program in it, a wrapper
that ignores SIGTSTP, a wrapper leading its own session.

A tmux pane runs a real interactive shell (bash; zsh and fish where installed); the test types
into it with ``send-keys`` as a user would and reads the screen (``capture-pane``), polled up to
a bound, never after a sleep. The Ctrl-Z test also records ``stty -g`` before and after, so
the terminal's modes are proven back once the job is done.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
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
    """One tmux server (a private socket) whose one pane runs ``argv`` (an interactive shell)."""

    def __init__(self, tmp_path, argv: list[str]):
        self.jsonl = tmp_path / "run.jsonl"
        self._socket_dir = tempfile.mkdtemp(prefix="pk-tmux-")  # a socket path must stay short
        self._socket = os.path.join(self._socket_dir, "s")
        self.runner: int | None = None
        environment = [f"HOME={tmp_path}", "PATH=/usr/bin:/bin", "TERM=screen", f"PS1={PROMPT} "]
        size = ["-x", "150", "-y", "40"]
        try:
            self.tmux("new-session", "-d", "-s", "t", *size, "-c", str(tmp_path), "env", "-i", *environment, *argv)
            self.shell_pid = int(self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}"))
        except BaseException:
            self.close()  # the server and its socket's directory gone with it
            raise

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

    def lent_to(self, child: int) -> None:
        """Until the runner has lent the terminal to the child: the child's group its foreground."""
        _until(lambda: _stat(self.shell_pid)[5] == child, f"the terminal was never lent: {self.screen()}")

    def close(self) -> None:
        """The pane's end hangs up its terminal: a runner left waits on nothing, and is waited for."""
        subprocess.run(["tmux", "-S", self._socket, "kill-server"], capture_output=True, timeout=SAFETY_NET)
        shutil.rmtree(self._socket_dir, ignore_errors=True)
        deadline = time.monotonic() + SAFETY_NET
        while self.runner is not None and os.path.exists(f"/proc/{self.runner}"):
            assert time.monotonic() < deadline, "the runner outlived its terminal"
            time.sleep(0.02)


def _until(done, what: str) -> None:
    deadline = time.monotonic() + SAFETY_NET
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (``T``), from ``/proc/<pid>/stat``'s state."""
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] == "T"


def _stat(pid: int) -> list[int]:
    """``/proc/<pid>/stat``'s numbers after the name: [1] its parent, [2] its group, [5] its
    terminal's foreground group."""
    with open(f"/proc/{pid}/stat") as handle:
        return [int(field) if field.lstrip("-").isdigit() else 0 for field in handle.read().rsplit(")", 1)[1].split()]


def _runner(tmp_path, child: str = CHILD) -> str:
    """The runner's command line, lending the terminal to ``child`` (a Python program)."""
    (tmp_path / "child.py").write_text(child)
    runner = [*cli_command(), "run", "--jsonl", str(tmp_path / "run.jsonl"), "--inherit-stdio"]
    return shlex.join([*runner, "--", sys.executable, str(tmp_path / "child.py")])


def _wrapped(tmp_path, wrapper: str) -> str:
    """The command line typed: the runner under ``wrapper``, which says the runner's exit code."""
    script = _runner(tmp_path) + '; echo "rc=$?"'
    if wrapper == "sh":
        return f"sh -c {shlex.quote(script)}"
    (tmp_path / "Makefile").write_text("all:\n\t" + script.replace("$", "$$") + "\n")
    return f"make -s -f {shlex.quote(str(tmp_path / 'Makefile'))}"


def _in_its_read(pane: ShellPane) -> int:
    """The run's child, once lent the terminal and in its read; the pane knows its runner."""
    child = wait_for_event(pane.jsonl, "run_started")["root_pid"]
    pane.runner = _stat(child)[1]
    pane.lent_to(child)
    pane.wait_for_screen("READY")
    return child


@pytest.mark.parametrize(
    "shell, wrapper", [("bash", "sh"), ("bash", "make"), ("zsh", "sh"), ("fish", "sh")], ids=lambda word: word
)
def test_ctrl_z_stops_the_wrapper_the_runner_shares_its_group_with(tmp_path, shell, wrapper):
    """The runner judged whether it could stop as a job by itself: its parent, the wrapper, is in
    its group, so it left the child stopped holding the terminal, the wrapper and the shell
    waiting on it, the terminal frozen until a ``kill -CONT`` from elsewhere. Now the runner's
    whole group stops: the shell says the job stopped and gives its prompt back; ``fg``
    continues it, the child is lent the terminal again, reads the keys typed, its exit code
    reaches the wrapper, and the terminal's modes are as they were."""
    if shutil.which(shell) is None or shutil.which(wrapper) is None:
        pytest.skip(f"{shell} or {wrapper} is not installed")
    argv, stopped_word = SHELLS[shell]
    pane = ShellPane(tmp_path, argv)
    try:
        pane.wait_for_prompt()
        pane.type(f"stty -g > before.txt; {_wrapped(tmp_path, wrapper)}")
        child = _in_its_read(pane)
        pane.tmux("send-keys", "-t", "t", "C-z")
        pane.wait_for_prompt(stopped_word)
        pane.type("fg")
        pane.lent_to(child)
        pane.type("typed line")
        pane.wait_for_prompt("GOT typed line", "rc=3")
        pane.type("stty -g > after.txt")
        pane.wait_for_prompt("stty -g > after.txt")
        before, after = (tmp_path / "before.txt").read_text(), (tmp_path / "after.txt").read_text()
        assert before.strip() and before == after, (before, after)
    finally:
        pane.close()


# A program that pauses the runner it started (``kill -TSTP``, once told to by the file ``go``),
# resumes it once it is stopped, and exits with its exit code.
PAUSER = """import os, signal, subprocess, sys, time
runner = subprocess.Popen(sys.argv[2:])
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
os.kill(runner.pid, signal.SIGTSTP)
while open(f"/proc/{runner.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
    time.sleep(0.02)
print("paused", flush=True)
os.kill(runner.pid, signal.SIGCONT)
print("resumed", flush=True)
sys.exit(runner.wait())
"""


def test_a_program_pausing_its_runner_is_not_stopped_with_it(tmp_path):
    """A ``kill -TSTP`` of a runner lending its terminal stopped its whole process group: the
    program that sent it, in that group, stopped too and never sent its SIGCONT (the shell
    said the job stopped). The runner stops with its tree alone, as it did before: the program
    resumes it, and the child, its terminal still lent, reads the keys typed."""
    (tmp_path / "pauser.py").write_text(PAUSER)
    pane = ShellPane(tmp_path, SHELLS["bash"][0])
    try:
        pane.wait_for_prompt()
        pauser = shlex.join([sys.executable, str(tmp_path / "pauser.py"), str(tmp_path / "go")])
        pane.type(f'{pauser} {_runner(tmp_path)}; echo "rc=$?"')
        _in_its_read(pane)
        (tmp_path / "go").write_text("")
        pane.wait_for_screen("paused", "resumed")
        pane.type("typed line")
        pane.wait_for_prompt("GOT typed line", "rc=3")
    finally:
        pane.close()


def test_a_runner_that_found_sigtstp_ignored_is_not_stopped_by_its_child_stop(tmp_path):
    """A runner started with SIGTSTP ignored (a wrapper's ``SIG_IGN``, which the runner keeps)
    whose child, lent the terminal, takes Ctrl-Z at its default: the runner stopped itself (and
    its group) anyway, and the wrapper, ignoring it, ran on with the shell waiting on it; a
    ``kill -CONT`` of the child no longer finished the run, the stopped runner never collecting
    its child. The runner runs on, the child stops alone, as with the wrapper's ignore, and its
    ``kill -CONT`` lets it read the keys typed and the run end."""
    child = "import signal\nsignal.signal(signal.SIGTSTP, signal.SIG_DFL)\n" + CHILD
    ignoring = "import signal, subprocess, sys; signal.signal(signal.SIGTSTP, signal.SIG_IGN); "
    ignoring += "sys.exit(subprocess.run(sys.argv[1:]).returncode)"
    pane = ShellPane(tmp_path, SHELLS["bash"][0])
    try:
        pane.wait_for_prompt()
        pane.type(f'{shlex.join([sys.executable, "-c", ignoring])} {_runner(tmp_path, child)}; echo "rc=$?"')
        pid = _in_its_read(pane)
        pane.tmux("send-keys", "-t", "t", "C-z")
        _until(lambda: _stopped(pid), f"Ctrl-Z never stopped the child: {pane.screen()}")
        os.kill(pid, signal.SIGCONT)
        pane.type("typed line")
        pane.wait_for_prompt("GOT typed line", "rc=3")
    finally:
        pane.close()


def test_a_wrapper_leading_its_own_session_leaves_the_child_stopped_alone(tmp_path):
    """The runner's group has no parent outside it in its session (the wrapper, ``sh -c`` as a
    pane's command, leads the session): no shell can continue it, its group is orphaned and the
    kernel would discard its stop, its tree continued at once. So Ctrl-Z stops the child alone,
    which says each time it is continued: once, by the ``kill -CONT`` that lets it read the keys."""
    child = 'import signal\nsignal.signal(signal.SIGCONT, lambda *_: print("CONT", flush=True))\n' + CHILD
    pane = ShellPane(tmp_path, ["sh", "-c", _runner(tmp_path, child) + '; echo "rc=$?"; exec cat'])
    try:
        pid = _in_its_read(pane)
        pane.tmux("send-keys", "-t", "t", "C-z")
        _until(lambda: _stopped(pid), f"Ctrl-Z never stopped the child: {pane.screen()}")
        os.kill(pid, signal.SIGCONT)
        pane.wait_for_screen("CONT")
        pane.type("typed line")
        pane.wait_for_screen("GOT typed line", "rc=3")
        assert pane.screen().count("CONT") == 1, pane.screen()
    finally:
        pane.close()
