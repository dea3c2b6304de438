"""``run --pty`` with a stdin that carries input but is no terminal: the child's terminal gets none
of it (docs/io-modes.md), and the runner says so once on stderr, with the flag that gives it.
tests/test_pty_terminal.py checks that a terminal stdin is not warned about."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command, run_cli
from streams import check_stream, python_child, run_checked, stderr_lines, wait_until

WARNING = "processkit-cli: warning: standard input is {kind}, not a terminal: --pty passes none of it to the child's terminal; to type it in, {how}"
BY_DEV_STDIN = "add --stdin-file /dev/stdin"


def warnings(proc) -> list[str]:
    return [line for line in stderr_lines(proc) if "warning" in line]


def stdin_of(tmp_path, source: str, data: bytes = b"never typed\n") -> int:
    """A descriptor for the runner's stdin, of the kind ``source`` names, holding ``data``."""
    if source == "pipe":
        read_end, write_end = os.pipe()
        os.write(write_end, data)  # far below a pipe's buffer
        os.close(write_end)
        return read_end
    if source == "fifo":
        os.mkfifo(tmp_path / "fifo")
        fd = os.open(tmp_path / "fifo", os.O_RDWR)  # a writer of its own: the open never waits
        os.write(fd, data)
        return fd
    if source == "socket":  # /dev/stdin cannot open one: the words name a file instead
        ours, theirs = socket.socketpair()
        ours.sendall(data)
        ours.close()
        return theirs.detach()
    if source == "dev-null":
        return os.open(os.devnull, os.O_RDONLY)
    (tmp_path / "input.txt").write_bytes(data)
    return os.open(tmp_path / "input.txt", os.O_RDONLY)


@pytest.mark.parametrize(
    "source, kind, how",
    [
        ("pipe", "a pipe", BY_DEV_STDIN),
        ("fifo", "a pipe", BY_DEV_STDIN),
        ("file", "a file", BY_DEV_STDIN),
        ("socket", "a socket", "save it to a file and add --stdin-file FILE"),
    ],
)
def test_a_stdin_that_carries_input_is_warned_about_once(tmp_path, source, kind, how):
    fd = stdin_of(tmp_path, source)
    try:
        proc, _ = run_checked(tmp_path, "--pty", command=["true"], returncode=0, stdin=fd)
    finally:
        os.close(fd)
    assert warnings(proc) == [WARNING.format(kind=kind, how=how)]


@pytest.mark.parametrize(
    "before, flags, source, data",
    [
        pytest.param((), ("--", "true"), "dev-null", b"", id="dev-null"),
        pytest.param((), ("--", "true"), "file", b"", id="empty-file"),
        pytest.param((), ("--stdin-file", "given.txt", "--", "true"), "pipe", b"piped\n", id="stdin-file-given"),
        pytest.param(("--error-format", "json"), ("--", "true"), "pipe", b"piped\n", id="error-format-json"),
        pytest.param((), (), "pipe", b'["true"]', id="command-read-from-stdin"),
    ],
)
def test_no_warning_where_there_is_nothing_to_say(tmp_path, before, flags, source, data):
    (tmp_path / "given.txt").write_bytes(b"typed\n")
    command = [*cli_command(), *before, "run", "--pty", "--jsonl", "run.jsonl", *flags]
    fd = stdin_of(tmp_path, source, data)
    try:
        proc = subprocess.run(command, cwd=tmp_path, stdin=fd, capture_output=True, timeout=SAFETY_NET)
    finally:
        os.close(fd)
    assert (proc.returncode, proc.stderr) == (0, b"")
    check_stream(tmp_path / "run.jsonl", 0)


def test_no_warning_for_a_detached_run(tmp_path):
    """Its copy runs on a terminal with no input, whatever the launcher's stdin (docs/io-modes.md)."""
    jsonl = tmp_path / "run.jsonl"
    fd = stdin_of(tmp_path, "pipe")
    try:
        proc = run_cli("run", "--detach", "--pty", "--jsonl", jsonl, "--", "true", stdin=fd)
    finally:
        os.close(fd)
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert wait_until(lambda: b'"runner_exit"' in jsonl.read_bytes(), SAFETY_NET)
    check_stream(jsonl, 0)


def test_no_warning_for_a_closed_stdin(tmp_path):
    command = [*cli_command(), "run", "--pty", "--jsonl", "run.jsonl", "--", "true"]
    proc = subprocess.run(
        ["sh", "-c", 'exec "$@" <&-', "sh", *command], cwd=tmp_path, capture_output=True, timeout=SAFETY_NET
    )
    assert (proc.returncode, proc.stderr) == (0, b"")


def test_the_recommended_dev_stdin_delivers_piped_input_and_the_run_ends(tmp_path):
    received = tmp_path / "received.bin"
    child = f"import sys; data = sys.stdin.buffer.read(); open({str(received)!r}, 'wb').write(data)"
    text = b"first line\nsecond line\n"
    fd = stdin_of(tmp_path, "pipe", text)
    try:
        proc, _ = run_checked(
            tmp_path, "--pty", "--stdin-file", "/dev/stdin", command=python_child(child), returncode=0, stdin=fd
        )
    finally:
        os.close(fd)
    assert received.read_bytes() == text
    assert warnings(proc) == []
