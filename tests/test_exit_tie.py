"""An ending the child's exit outranks (here a capture overflow under ``--capture-overflow
cancel``), recorded once the root is gone, while a pipe's end of file that the exit left is still
to be read: the exit wins however late that read comes (docs/run.md §1.3), where a pipe that a
descendant still holds lets the overflow win at once (``race``: the stream's ``let_go``).

The runner is stopped while the child writes past the cap and exits, so on its next turns the
exit and the overflow are both ready; what the end of file's read waits for is held by a patched
stream, not by the machine's timing: before, the race waited a fixed 50 ms for that read
(``EXIT_TIE_SECONDS``), and a native pump's thread that told of the end later lost the exit."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import termios
import time

from conftest import SAFETY_NET, SHORT_EXIT_DRAIN, event_names, reaped, start_cli, wait_for_event, wait_for_file
from processkit.engine.echo import BACKLOG_LIMIT
from streams import check_stream, one, wait_until

CANCEL_AT_10 = ("--capture-max-bytes", "10", "--capture-overflow", "cancel")

# stderr's end of file, which the root's exit leaves, not heard before the exit's own bound (its
# timer records the exit): a watched stream's thread that tells of it late, as a loaded machine's
# may, and a pipe waiting on readiness likewise; the hurry at the exit still reads the latter.
STDERR_HEARD_LATE = (
    "streams",
    "OutputStream",
    "(lambda cls, ending: (setattr(cls, '_on_readable', (lambda real: lambda self: None if not self.open"
    " else real(self) if self.name != 'stderr' or ending.CHILD_EXIT in self._run.pending"
    " else (self._unlisten(), self._loop.call_later(0.01, self._on_readable)))(cls._on_readable)), cls)[1])"
    "(importlib.import_module('processkit.engine.streams').OutputStream,"
    " importlib.import_module('processkit.engine.endings').EndingKind)",
)
# The watch (the pump's thread reads the pipe) needs the native spawn's hashing thread.
WATCHED = {"PROCESSKIT_SPAWN": "native", "PROCESSKIT_HASH_THREAD": "1"}


def _is_zombie(pid: int) -> bool:
    return open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1][0] == "Z"


def _descriptors_of(pid: int, link: str) -> int:
    """How many of ``pid``'s descriptors are the file ``link`` names (``pipe:[INODE]``)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}") == link
        except OSError:  # closed meanwhile
            pass
    return count


def _queued(fd: int) -> int:
    """The bytes a pipe holds (its end ``fd``)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]


def _run_stopped_through_the_exit(tmp_path, script: str, patched: tuple[str, ...]):
    """``script`` run by ``sh`` (it waits for the file ``go``, then writes 11 bytes past the cap
    and exits) with its runner stopped from before ``go`` until its root is a zombie; returns the
    runner's exit code, stdout and stderr, and its events."""
    cap_dir, jsonl, ready, go = tmp_path / "cap", tmp_path / "run.jsonl", tmp_path / "ready", tmp_path / "go"
    script = f"touch {ready}; while [ ! -e {go} ]; do sleep 0.01; done; {script}"
    command = ("run", "--jsonl", jsonl, "--capture-dir", cap_dir, *CANCEL_AT_10, "--", "sh", "-c", script)
    env = dict(os.environ, **WATCHED)
    with reaped(start_cli(*command, patched=patched, env=env, cwd=tmp_path)) as proc:
        try:
            wait_for_file(ready, timeout=SAFETY_NET)
            root = wait_for_event(jsonl, "run_started", timeout=SAFETY_NET)["root_pid"]
            if os.environ["PROCESSKIT_PUMP"] == "native":
                # the pump's thread reads stderr (its watch's own descriptor of the pipe): what the
                # patched stream's late hearing stands for
                stderr = os.readlink(f"/proc/{root}/fd/2")
                watched = lambda: _descriptors_of(proc.pid, stderr) == 2  # noqa: E731
                wait_until(watched, SAFETY_NET, "the native pump's thread reading stderr")
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                go.touch()
                wait_until(lambda: _is_zombie(root), SAFETY_NET, "the root's exit")
            finally:
                os.kill(proc.pid, signal.SIGCONT)
        finally:
            go.touch()  # a wait that failed before it leaves no child looping for ever
        out, err = proc.communicate(timeout=SAFETY_NET)
    return proc.returncode, out, err, jsonl


def test_the_exit_beats_an_overflow_while_its_end_of_file_is_still_to_be_heard(tmp_path, pump_backend):
    """stdout's last bytes cross the cap once the root is gone; stderr's end of file is heard
    only at the exit's bound (shortened to 0.5 s): the exit, first in its turn, wins (0). Before,
    the overflow won 50 ms after the exit (113) with the native pump (the python pump's hurry
    reads stderr's end at the exit)."""
    returncode, out, err, jsonl = _run_stopped_through_the_exit(
        tmp_path, "head -c 11 /dev/zero", (*STDERR_HEARD_LATE, *SHORT_EXIT_DRAIN)
    )
    assert returncode == 0, err
    assert out == b"\0" * 11
    events = check_stream(jsonl, 0)
    assert one(events, "output_captured")["stdout"]["truncated"]


def test_an_overflow_after_the_exit_wins_while_a_descendant_holds_a_pipe(tmp_path, pump_backend):
    """The same, with a descendant holding stderr (until ``go2``, made by the test once the run
    ended): no end of file is due there, so the overflow wins (113) without waiting for the
    exit's bound (the default 5 s: the run's own ending says which one won)."""
    held = tmp_path / "go2"
    script = f"(while [ ! -e {held} ]; do sleep 0.01; done) & head -c 11 /dev/zero"
    try:
        # the drain then waits for the held pipe no longer than it must (2 s, shortened)
        patched = (*STDERR_HEARD_LATE, "teardown", "PUMP_DRAIN_SECONDS", "0.1")
        returncode, out, err, jsonl = _run_stopped_through_the_exit(tmp_path, script, patched)
    finally:
        held.touch()
    assert returncode == 113, err
    assert one(check_stream(jsonl, 113), "output_overflow")["stream"] == "stdout"


TIMEOUT = 1.0  # --timeout: past the runner's filling its echo's backlog, and waited out while it is stopped
SIZE = 4_700_000  # past the echo's backlog and the test's pipe, within them and the runner's pipe


def test_a_timeout_after_the_exit_wins_at_once_while_an_echo_reader_is_behind(tmp_path, pump_backend):
    """The root writes SIZE bytes into a pipe the test does not read: the runner fills its echo's
    backlog and stops reading its pipe (the stream paused), the rest left there. The runner is
    stopped while the root exits and the ``--timeout`` passes, so on its next turn the exit and the
    timeout are both ready, every pipe without a writer: the paused stream's end of file is not a
    read away, so the timeout wins (106) at once, and the test reads only once the run has ended.
    Where the race took a paused stream for one left to read, it waited for it until the exit's
    bound (shortened to 0.5 s) and the exit won (0)."""
    jsonl, wrote, go = tmp_path / "run.jsonl", tmp_path / "wrote", tmp_path / "go"
    script = f"head -c {SIZE} /dev/zero; touch {wrote}; until [ -e {go} ]; do sleep 0.01; done"
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    command = ("run", "--jsonl", jsonl, "--timeout", f"{TIMEOUT:g}s", "--", "sh", "-c", script)
    runner = start_cli(*command, patched=SHORT_EXIT_DRAIN, stdout=write_end, cwd=tmp_path)
    os.close(write_end)
    with reaped(runner):
        try:
            assert select.select([read_end], [], [], SAFETY_NET)[0], "no echo"
            timed_out_by = time.monotonic() + TIMEOUT  # the race had begun: its timer is due by then
            root = wait_for_event(jsonl, "run_started")["root_pid"]
            wait_for_file(wrote)
            child_pipe = os.open(f"/proc/{root}/fd/1", os.O_RDONLY | os.O_NONBLOCK)
            try:  # the backlog: every byte neither pipe holds
                backlog = lambda: SIZE - _queued(child_pipe) - _queued(read_end)  # noqa: E731
                wait_until(lambda: backlog() >= BACKLOG_LIMIT, SAFETY_NET, "the echo's backlog full")
            finally:
                os.close(child_pipe)
            os.kill(runner.pid, signal.SIGSTOP)
            try:
                assert "timeout" not in event_names(jsonl), "the timeout came before the echo was full"
                go.touch()
                wait_until(lambda: _is_zombie(root), SAFETY_NET, "the root's exit")
                wait_until(lambda: time.monotonic() > timed_out_by, SAFETY_NET, "the timeout")
            finally:
                os.kill(runner.pid, signal.SIGCONT)
        finally:
            go.touch()  # a wait that failed before it leaves no child looping for ever
        wait_for_event(jsonl, "cleanup_started")  # the ending decided: the test reads again
        taken = 0
        while chunk := os.read(read_end, 1 << 16):
            taken += len(chunk)
        os.close(read_end)
        err = runner.stderr.read()
        assert runner.wait(SAFETY_NET) == 106, err
    assert taken == SIZE
    assert one(check_stream(jsonl, 106), "timeout")["reason"] == "overall"
