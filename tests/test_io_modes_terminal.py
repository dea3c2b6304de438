"""The I/O modes on a real terminal: a pty whose slave is the runner's stdin, stdout and stderr,
in a session of its own where the pty is the controlling terminal (as under a login shell).

A small session host plays the shell: it takes the pty as its controlling terminal, runs the
runner in its own foreground group (or in a background group), and afterwards records whose
group the terminal's foreground is. The test types on the pty master, like a user.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import textwrap
import time

import signal
import termios

import pytest

from conftest import SAFETY_NET, cli_command, pid_alive, read_events, wait_for_event, wait_for_file
from processkit.events.validate import validate_event
from streams import check_stream

PY = sys.executable

HOST = textwrap.dedent(
    """
    import fcntl, json, os, signal, subprocess, sys, termios, time
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    # A handler, not SIG_IGN: a Ctrl-C must not end the host, and the runner must not inherit
    # an ignored SIGINT (handlers are reset at exec, SIG_IGN is not).
    signal.signal(signal.SIGINT, lambda *_: None)
    result, placement, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    def job():  # a shell's foreground job: a group of its own, given the terminal
        os.setpgrp()
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        os.tcsetpgrp(0, os.getpgrp())
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    preexec = {"background": os.setpgrp, "fg-later": os.setpgrp, "job": job}.get(placement)
    runner = subprocess.Popen(argv, preexec_fn=preexec)
    if placement == "fg-later":  # started as a background job, brought to the foreground (fg) on cue
        while not os.path.exists(result + ".fg"):
            time.sleep(0.02)
        os.tcsetpgrp(0, runner.pid)
        placement = "job"
    rc = runner.wait()
    if placement == "job":  # the terminal back, as a shell takes it
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        os.tcsetpgrp(0, os.getpgrp())
    with open(result, "w") as handle:
        json.dump({"rc": rc, "foreground_is_host": os.tcgetpgrp(0) == os.getpgrp()}, handle)
    """
)

# What the child sees, written atomically to argv[1]; argv[2] says what it does next.
CHILD = textwrap.dedent(
    """
    import errno, json, os, signal, sys, time
    report, behaviour = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    facts = {
        "stdin_tty": os.isatty(0),
        "stdout_tty": os.isatty(1),
        "foreground": os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp(),
    }
    if behaviour == "readline":
        facts["line"] = sys.stdin.readline()
    if behaviour == "devtty":  # a password prompt: it opens the terminal it was not given
        try:
            os.close(os.open("/dev/tty", os.O_RDWR))
            facts["devtty"] = "opened"  # (not read here: a background group's read stops it for good)
        except OSError as exc:
            facts["devtty"] = errno.errorcode[exc.errno]
    if behaviour.startswith("raw-"):  # a full-screen program: no echo, no line editing
        import tty
        tty.setraw(0)
    with open(report + ".tmp", "w") as handle:
        json.dump(facts, handle)
    os.rename(report + ".tmp", report)
    if behaviour in ("wait", "raw-wait"):
        time.sleep(30)
    if behaviour == "raw-killed":
        os.kill(os.getpid(), signal.SIGKILL)
    """
)

# The real CLI with one OS call failing: tcsetpgrp to any group but the runner's own.
REFUSE_HANDOFF = textwrap.dedent(
    """
    import errno, os, sys
    real = os.tcsetpgrp
    def refuse(fd, pgid):
        if pgid != os.getpgrp():
            raise OSError(errno.EPERM, os.strerror(errno.EPERM))
        real(fd, pgid)
    os.tcsetpgrp = refuse
    from processkit.cli.main import main
    sys.exit(main())
    """
)


class Terminal:
    """A pty with a session host on its slave side; the test holds the master. ``HOST`` and
    ``CHILD`` are the host's and the child's scripts (tests/test_io_modes_job_control.py has a
    host that stops and continues jobs as a shell does)."""

    HOST = HOST
    CHILD = CHILD

    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.jsonl = tmp_path / "run.jsonl"
        self.report = tmp_path / "child.json"
        self.result = tmp_path / "host.json"
        self.master, self._slave = pty.openpty()
        self.host: subprocess.Popen | None = None

    def run(self, *flags, behaviour: str, placement: str = "foreground", cli=None) -> None:
        """Start ``processkit-cli run FLAGS -- CHILD`` under the host; returns at once."""
        command = [*(cli or cli_command()), "run", *flags, "--timeout", "20s", "--jsonl", str(self.jsonl)]
        command += ["--", PY, "-c", self.CHILD, str(self.report), behaviour]
        self.start_host(placement, command)

    def start_host(self, placement: str, command: list[str]) -> None:
        """The host on the pty's slave, running ``command`` placed as ``placement`` says."""
        host = self.dir / "host.py"
        host.write_text(self.HOST)
        slave = self._slave
        self.host = subprocess.Popen(
            [PY, str(host), str(self.result), placement, *command],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            cwd=self.dir,
        )
        os.close(slave)
        self._slave = -1

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def foreground_group(self) -> int:
        """The terminal's foreground group, read from the master side (Linux allows it)."""
        return os.tcgetpgrp(self.master)

    def child_facts(self) -> dict:
        wait_for_file(self.report)
        return json.loads(self.report.read_text())

    def finish(self) -> dict:
        self.host.wait(SAFETY_NET)
        return json.loads(self.result.read_text())

    def close(self) -> None:
        if self.host is not None and self.host.poll() is None:
            self.host.kill()
            self.host.wait()
        if self._slave >= 0:
            os.close(self._slave)
        os.close(self.master)


@pytest.fixture
def terminal(tmp_path):
    term = Terminal(tmp_path)
    yield term
    term.close()


def test_default_mode_child_sees_pipes_and_ctrl_c_cancels_the_run(terminal):
    terminal.run(behaviour="wait")
    started = wait_for_event(terminal.jsonl, "run_started")
    facts = terminal.child_facts()
    assert (facts["stdin_tty"], facts["stdout_tty"], facts["foreground"]) == (False, False, False)
    assert terminal.foreground_group() == terminal.host.pid  # the runner's group keeps the terminal
    terminal.type(b"\x03")
    result = terminal.finish()
    assert result == {"rc": 107, "foreground_is_host": True}
    events = check_stream(terminal.jsonl, 107)
    cancelled = next(e for e in events if e["event"] == "cancelled")
    assert cancelled["source"] == "ctrl_c"
    assert (events[-1]["code"], events[-1]["source"], events[-1]["child_code"]) == (107, "cancelled", None)
    assert not pid_alive(started["root_pid"])


def test_inherit_stdio_child_owns_the_terminal_and_ctrl_c_is_its_own_exit(terminal):
    terminal.run("--inherit-stdio", behaviour="wait")
    started = wait_for_event(terminal.jsonl, "run_started")
    facts = terminal.child_facts()
    assert (facts["stdin_tty"], facts["stdout_tty"]) == (True, True)
    assert terminal.foreground_group() == started["root_pid"]  # the child leads its own group
    terminal.type(b"\x03")
    result = terminal.finish()
    assert result == {"rc": 130, "foreground_is_host": True}
    events = check_stream(terminal.jsonl, 130)
    names = [e["event"] for e in events]
    assert "cancelled" not in names
    exited = events[names.index("root_exited")]
    assert (exited["outcome"], exited["signal"]) == ("signalled", 2)
    assert (events[-1]["code"], events[-1]["source"], events[-1]["child_code"]) == (130, "child_exit", 130)


def test_inherit_stdin_child_reads_the_terminal_while_its_output_is_piped(terminal):
    """A child reading its terminal from a background group would be stopped (SIGTTIN)."""
    terminal.run("--inherit-stdin", behaviour="readline")
    wait_for_event(terminal.jsonl, "run_started")
    terminal.type(b"typed line\n")
    facts = terminal.child_facts()
    assert facts == {"stdin_tty": True, "stdout_tty": False, "foreground": True, "line": "typed line\n"}
    assert terminal.finish() == {"rc": 0, "foreground_is_host": True}


@pytest.mark.parametrize("stdin", [(), ("--stdin-file", "/dev/null")], ids=["null", "file"])
def test_a_child_given_no_terminal_cannot_open_the_runners(terminal, spawn_backend, stdin):
    """Its terminal's read would stop it (SIGTTIN) in its background group, for good, and the
    run with it; without a controlling terminal /dev/tty fails at once (ENXIO), as under CI."""
    terminal.run(*stdin, behaviour="devtty")
    assert terminal.child_facts()["devtty"] == "ENXIO"
    assert terminal.finish() == {"rc": 0, "foreground_is_host": True}


def _state_becomes(pid: int, wanted: str, timeout: float = SAFETY_NET) -> bool:
    """Whether ``pid``'s state (``/proc/PID/stat``: ``T`` stopped) becomes ``wanted``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] == wanted:
                return True
        time.sleep(0.02)
    return False


def test_ctrl_z_stops_the_runner_with_its_tree_and_fg_continues_both(terminal):
    """The runner's group is the terminal's foreground, its child's is not: Ctrl-Z stopped the
    runner alone and the child went on running behind the "stopped" job."""
    terminal.run(behaviour="wait", placement="job")
    started = wait_for_event(terminal.jsonl, "run_started")
    terminal.child_facts()
    child = started["root_pid"]
    runner = _runner_of(child)
    terminal.type(b"\x1a")
    assert _state_becomes(runner, "T") and _state_becomes(child, "T")
    os.killpg(runner, signal.SIGCONT)  # what fg sends the job
    assert _state_becomes(child, "S") and _state_becomes(runner, "S")
    os.kill(runner, signal.SIGTERM)
    assert terminal.finish() == {"rc": 107, "foreground_is_host": True}
    assert not pid_alive(child)


def test_a_child_stopped_reading_the_terminal_of_a_background_runner_gets_it_at_fg(terminal):
    """Started in the background, the runner lends no terminal, and the child's read stops it
    (SIGTTIN). ``fg`` makes the runner's group the foreground with no signal to a running job:
    the child stayed stopped for good. The runner now lends the terminal once it has it."""
    terminal.run("--inherit-stdin", behaviour="readline", placement="fg-later")
    started = wait_for_event(terminal.jsonl, "run_started")
    assert _state_becomes(started["root_pid"], "T")  # its read of the terminal stopped it
    (terminal.dir / "host.json.fg").touch()
    terminal.type(b"typed line\n")
    assert terminal.child_facts()["line"] == "typed line\n"
    assert terminal.finish() == {"rc": 0, "foreground_is_host": True}


def _runner_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.parametrize(
    ("behaviour", "rc", "restored"),
    [("raw-killed", 137, True), ("raw-wait", 107, True), ("raw-exit", 0, False)],
)
def test_a_full_screen_child_that_was_killed_leaves_the_terminal_modes_as_they_were(terminal, behaviour, rc, restored):
    """Raw mode set by a child killed (by a signal of its own, or by the run's teardown) is
    undone, as a shell does; a child that exited by itself keeps what it set, as ``stty`` must."""
    before = termios.tcgetattr(terminal.master)  # a master reports its slave's settings
    terminal.run("--inherit-stdio", behaviour=behaviour)
    started = wait_for_event(terminal.jsonl, "run_started")
    terminal.child_facts()
    if behaviour == "raw-wait":  # (raw-exit shows the raw mode takes; raw-killed may be gone by now)
        assert termios.tcgetattr(terminal.master) != before
        os.kill(_runner_of(started["root_pid"]), signal.SIGTERM)
    assert terminal.finish() == {"rc": rc, "foreground_is_host": True}
    assert (termios.tcgetattr(terminal.master) == before) is restored


def test_a_background_runner_leaves_its_child_in_the_background(terminal):
    terminal.run("--inherit-stdio", behaviour="exit", placement="background")
    facts = terminal.child_facts()
    assert (facts["stdin_tty"], facts["stdout_tty"], facts["foreground"]) == (True, True, False)
    assert terminal.finish() == {"rc": 0, "foreground_is_host": True}


def test_failed_foreground_handoff_is_container_failed_102(terminal):
    terminal.run("--inherit-stdio", behaviour="wait", cli=[PY, "-c", REFUSE_HANDOFF])
    result = terminal.finish()
    assert result == {"rc": 102, "foreground_is_host": True}
    events = read_events(terminal.jsonl)
    assert [e["event"] for e in events] == [
        "container_failed",
        "resource_summary",
        "cleanup_started",
        "cleanup_finished",
        "runner_exit",
    ]
    assert [problem for e in events for problem in validate_event(e)] == []
    assert (events[0]["phase"], events[0]["code"]) == ("foreground", 102)
    assert events[2]["members_before"] == 1  # the child had spawned, and was torn down
    assert events[3]["remaining"] == 0
    assert (events[-1]["code"], events[-1]["source"], events[-1]["child_code"]) == (102, "container_error", None)
