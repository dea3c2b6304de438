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


def piped(data: bytes) -> int:
    """The read end of a pipe that holds ``data`` and is closed for writing."""
    read_end, write_end = os.pipe()
    os.write(write_end, data)  # far below a pipe's buffer
    os.close(write_end)
    return read_end


def test_a_pipe_is_warned_about_once(tmp_path):
    fd = piped(b"never typed\n")
    try:
        proc, _ = run_checked(tmp_path, "--pty", command=["true"], returncode=0, stdin=fd)
    finally:
        os.close(fd)
    assert warnings(proc) == [WARNING.format(kind="a pipe", how=BY_DEV_STDIN)]


def test_a_fifo_is_warned_about(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR)  # a writer of its own: the open never waits
    try:
        proc, _ = run_checked(tmp_path, "--pty", command=["true"], returncode=0, stdin=fd)
    finally:
        os.close(fd)
    assert warnings(proc) == [WARNING.format(kind="a pipe", how=BY_DEV_STDIN)]


def test_a_regular_file_is_warned_about(tmp_path):
    source = tmp_path / "input.txt"
    source.write_bytes(b"never typed\n")
    with open(source, "rb") as handle:
        proc, _ = run_checked(tmp_path, "--pty", command=["true"], returncode=0, stdin=handle)
    assert warnings(proc) == [WARNING.format(kind="a file", how=BY_DEV_STDIN)]


def test_a_socket_is_warned_about_without_dev_stdin(tmp_path):
    """/dev/stdin cannot open a socket: the words name a file instead."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        proc, _ = run_checked(tmp_path, "--pty", command=["true"], returncode=0, stdin=theirs)
    assert warnings(proc) == [WARNING.format(kind="a socket", how="save it to a file and add --stdin-file FILE")]


@pytest.mark.parametrize(
    "before, flags, stdin",
    [
        pytest.param((), ("--", "true"), None, id="dev-null"),
        pytest.param((), ("--", "true"), b"", id="empty-file"),
        pytest.param((), ("--stdin-file", "given.txt", "--", "true"), b"piped\n", id="stdin-file-given"),
        pytest.param(("--error-format", "json"), ("--", "true"), b"piped\n", id="error-format-json"),
        pytest.param((), (), b'["true"]', id="command-read-from-stdin"),
    ],
)
def test_no_warning_where_there_is_nothing_to_say(tmp_path, before, flags, stdin):
    (tmp_path / "given.txt").write_bytes(b"typed\n")
    command = [*cli_command(), *before, "run", "--pty", "--jsonl", "run.jsonl", *flags]
    if stdin == b"":
        (tmp_path / "empty.txt").write_bytes(b"")
        fd = os.open(tmp_path / "empty.txt", os.O_RDONLY)
    else:
        fd = os.open(os.devnull, os.O_RDONLY) if stdin is None else piped(stdin)
    try:
        proc = subprocess.run(command, cwd=tmp_path, stdin=fd, capture_output=True, timeout=SAFETY_NET)
    finally:
        os.close(fd)
    assert (proc.returncode, proc.stderr) == (0, b"")
    check_stream(tmp_path / "run.jsonl", 0)


def test_no_warning_for_a_detached_run(tmp_path):
    """Its copy runs on a terminal with no input, whatever the launcher's stdin (docs/io-modes.md)."""
    jsonl = tmp_path / "run.jsonl"
    fd = piped(b"never typed\n")
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
    fd = piped(text)
    try:
        proc, _ = run_checked(
            tmp_path, "--pty", "--stdin-file", "/dev/stdin", command=python_child(child), returncode=0, stdin=fd
        )
    finally:
        os.close(fd)
    assert received.read_bytes() == text
    assert warnings(proc) == []
