"""``run --detach --stdin-file /dev/stdin`` (or ``/dev/fd/N``, a process substitution; and
``--env-file`` so): the path names one of the launcher's own descriptors, and the detached copy,
started with null stdio, read ``/dev/null`` there (or failed 111 for a ``/dev/fd/N`` it did not
have): the caller's input, or its environment file, was lost without a word. The copy is now
handed that descriptor under the same number."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command, run_cli, wait_for_event
from streams import check_stream

PAYLOAD = b"the caller's input\n" * 100


def detached_stdout(tmp_path, named: str, data: bytes, flag: str, command: list[str]) -> bytes:
    """Run ``command`` detached, ``flag`` naming ``named`` (its ``{fd}`` a descriptor above 2) of
    a pipe that holds ``data`` and is the launcher's stdin; the child's stdout once the run ended."""
    read_end, write_end = os.pipe()
    os.write(write_end, data)  # far below a pipe's capacity
    os.close(write_end)
    fd = os.dup(read_end) if "{fd}" in named else 0  # above 2: a process substitution's number
    launcher = [*cli_command(), "run", "--detach", flag, named.format(fd=fd), "--capture-dir", "cap"]
    try:
        proc = subprocess.run(
            [*launcher, "--jsonl", "run.jsonl", "--", *command],
            cwd=tmp_path,
            stdin=read_end,
            pass_fds=(fd,) if fd else (),
            capture_output=True,
            timeout=SAFETY_NET,
        )
    finally:
        os.close(read_end)
        if fd:
            os.close(fd)
    assert (proc.returncode, proc.stderr) == (0, b"")
    wait_for_event(tmp_path / "run.jsonl", "runner_exit")
    check_stream(tmp_path / "run.jsonl", 0)
    return (tmp_path / "cap" / "stdout.log").read_bytes()


@pytest.mark.parametrize("named", ["/dev/stdin", "/proc/self/fd/0", "/dev/fd/{fd}"])
def test_a_detached_run_reads_the_launchers_own_descriptor(tmp_path, named):
    assert detached_stdout(tmp_path, named, PAYLOAD, "--stdin-file", ["cat"]) == PAYLOAD


@pytest.mark.parametrize("flag", ["--stdin-file", "--env-file"])
def test_a_link_to_dev_stdin_is_the_launchers_stdin_too(tmp_path, flag):
    """Only the names themselves were handed on: a link to ``/dev/stdin`` opened the copy's
    ``/dev/null``, and the child read nothing (or got no variable), exit 0."""
    (tmp_path / "input").symlink_to("/dev/stdin")
    if flag == "--stdin-file":
        assert detached_stdout(tmp_path, "input", PAYLOAD, flag, ["cat"]) == PAYLOAD
    else:
        command = ["sh", "-c", 'printf %s "$HANDED_TOKEN"']
        assert (
            detached_stdout(tmp_path, "input", b"HANDED_TOKEN=from-the-caller\n", flag, command) == b"from-the-caller"
        )


def test_a_link_to_dev_stdin_is_the_launchers_stdin_when_it_is_a_file(tmp_path):
    """A regular file as the launcher's stdin (``< F``) is the copy's only if handed on: the
    link led to the copy's ``/dev/null``, the child read nothing, exit 0."""
    (tmp_path / "input").symlink_to("/dev/stdin")
    (tmp_path / "given").write_bytes(PAYLOAD)
    launcher = [*cli_command(), "run", "--detach", "--stdin-file", "input", "--capture-dir", "cap"]
    with open(tmp_path / "given", "rb") as stdin:
        proc = subprocess.run(
            [*launcher, "--jsonl", "run.jsonl", "--", "cat"], cwd=tmp_path, stdin=stdin, capture_output=True,
            timeout=SAFETY_NET,
        )  # fmt: skip
    assert (proc.returncode, proc.stderr) == (0, b"")
    wait_for_event(tmp_path / "run.jsonl", "runner_exit")
    assert (tmp_path / "cap" / "stdout.log").read_bytes() == PAYLOAD


@pytest.mark.parametrize("named", ["/dev/stdin", "/dev/fd/{fd}"])
def test_a_detached_runs_env_file_can_be_the_launchers_own_descriptor(tmp_path, named):
    printed = detached_stdout(
        tmp_path, named, b"HANDED_TOKEN=from-the-caller\n", "--env-file", ["sh", "-c", 'printf %s "$HANDED_TOKEN"']
    )
    assert printed == b"from-the-caller"


@pytest.mark.parametrize("fd", [3, 4])
def test_a_detached_run_never_hands_its_readiness_pipe_to_the_child(tmp_path, fd):
    """``/dev/fd/N`` the caller never passed: the launcher's readiness pipe took that number (or
    the copy's end of it did), and the child's ``cat`` read the copy's own ``started``."""
    proc = run_cli(
        "run", "--detach", "--stdin-file", f"/dev/fd/{fd}", "--capture-dir", "cap", "--jsonl", "run.jsonl", "--", "cat",
        cwd=tmp_path,
    )  # fmt: skip
    if proc.returncode != 111:  # the copy had nothing there to open: refused as in the foreground
        assert (proc.returncode, proc.stderr) == (0, b"")
        wait_for_event(tmp_path / "run.jsonl", "runner_exit")
        assert b"started" not in (tmp_path / "cap" / "stdout.log").read_bytes()


def test_a_terminal_named_by_stdin_file_stays_with_the_caller(tmp_path):
    """``--stdin-file /dev/stdin`` where the launcher's stdin is a terminal: the copy is not handed
    it (it would read the caller's keys from under its shell); the child reads ``/dev/null``."""
    primary, replica = os.openpty()
    terminal = os.ttyname(replica)
    os.write(primary, b"typed\n")  # a line the child would read were it handed the terminal
    try:
        proc = run_cli(
            "run", "--detach", "--stdin-file", "/dev/stdin", "--capture-dir", "cap", "--jsonl", "run.jsonl", "--", "cat",
            cwd=tmp_path, stdin=replica,
        )  # fmt: skip
        os.close(replica)
        assert (proc.returncode, proc.stderr) == (0, b"")
        started = wait_for_event(tmp_path / "run.jsonl", "run_started")
        holders = [started["root_pid"], _parent(started["root_pid"])]
        # the terminal's primary side is still open: a holder's cat would still be reading it
        assert not [pid for pid in holders if pid and terminal in _open_files(pid)]
    finally:
        os.close(primary)  # a cat that holds it ends
    wait_for_event(tmp_path / "run.jsonl", "runner_exit")
    assert (tmp_path / "cap" / "stdout.log").read_bytes() == b""


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except OSError:  # ended already
        return None


def _open_files(pid: int) -> list[str]:
    found = []
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                found.append(os.readlink(f"/proc/{pid}/fd/{name}"))
            except OSError:
                continue
    except OSError:  # ended already
        pass
    return found


@pytest.mark.parametrize(
    ("flag", "path", "fd"),
    [
        ("--stdin-file", "/dev/fd/1", 1),
        ("--env-file", "/dev/fd/2", 2),
        ("--stdin-file", "/dev/fd/2", 2),
        ("--stdin-file", "/dev/stdout", 1),
        ("--env-file", "/dev/stderr", 2),
    ],
)
def test_the_launchers_stdout_or_stderr_named_as_input_is_refused(tmp_path, flag, path, fd):
    """``/dev/fd/1`` (or ``/dev/stdout``) on a pipe: the copy's stdout and stderr are /dev/null,
    so it would have read that, the caller's input lost; a usage error (100) in one line instead,
    nothing started."""
    proc = run_cli("run", "--detach", flag, path, "--jsonl", tmp_path / "run.jsonl", "--", "cat")
    words = f"processkit-cli: --detach cannot hand on /dev/fd/{fd}, the launcher's standard "
    assert proc.returncode == 100 and proc.stderr.decode().startswith(words), proc.stderr
    assert proc.stderr.count(b"\n") == 1 and not (tmp_path / "run.jsonl").exists()
