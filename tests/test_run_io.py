"""The default I/O mode end to end: closed stdin, byte-exact echo on separate streams
and no runner descriptor leaking into the child (the capture report is in test_capture.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command, run_cli
from streams import check_stream, one, python_child, require_mechanism, run_checked

LIST_FDS = """
import os
fds = []
for name in os.listdir("/proc/self/fd"):
    try:
        os.fstat(int(name))  # the listing's own descriptor is closed by now
    except OSError:
        continue
    fds.append(int(name))
print(sorted(fds))
"""


def test_the_child_inherits_the_callers_descriptors_and_none_of_the_runners(tmp_path, containment, pump_backend):
    """The caller's passes, as the reference's (processkit/caller_fds.py); the capture files,
    pipes and groups of the runner do not."""
    passed = os.open(os.devnull, os.O_RDONLY)
    try:
        _, events = run_checked(
            tmp_path,
            "--capture-dir",
            tmp_path / "cap",
            command=python_child(LIST_FDS),
            returncode=0,
            pass_fds=(passed,),
        )
    finally:
        os.close(passed)
    require_mechanism(events, containment)
    assert (tmp_path / "cap" / "stdout.log").read_text() == f"[0, 1, 2, {passed}]\n"


def test_the_default_stdin_is_closed_even_when_the_runner_has_an_idle_pipe(tmp_path):
    """The child must not wait on input nobody will ever write (the runner's stdin is open)."""
    read_end, write_end = os.pipe()
    try:
        code = "import os, sys; print(os.readlink('/proc/self/fd/0'), repr(sys.stdin.read()))"
        proc, _ = run_checked(tmp_path, "--timeout", "20s", command=python_child(code), returncode=0, stdin=read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert proc.stdout == b"/dev/null ''\n"


NASTY = (
    bytes(range(256))
    + b"\xff\xfe invalid \xc3\x28 utf-8\r\ncrlf\r\n\x00nul"
    + "\u00e9\U0001f680".encode()
    + b"no newline"
)


def test_echo_is_byte_exact_and_keeps_the_streams_apart(tmp_path, pump_backend):
    code = f"import os; os.write(1, {NASTY!r}); os.write(2, {NASTY[::-1]!r}); os.write(1, b'tail')"
    proc, _ = run_checked(tmp_path, command=python_child(code), returncode=0)
    assert proc.stdout == NASTY + b"tail"
    assert proc.stderr == NASTY[::-1]


def test_heavy_output_arrives_whole_and_in_order(tmp_path, pump_backend):
    """24 MiB through echo and capture: the echo is complete, the capture keeps its 8 MiB."""
    blocks = 96
    code = (
        "import sys\n"
        "block = bytes(range(256)) * 1024\n"
        f"for i in range({blocks}): sys.stdout.buffer.write(i.to_bytes(4, 'big') + block[4:])\n"
    )
    block = bytes(range(256)) * 1024
    expected = b"".join(i.to_bytes(4, "big") + block[4:] for i in range(blocks))
    proc, events = run_checked(tmp_path, "--capture-dir", tmp_path / "cap", command=python_child(code), returncode=0)
    assert proc.stdout == expected
    stdout = one(events, "output_captured")["stdout"]
    assert (stdout["bytes_seen"], stdout["bytes_written"], stdout["truncated"]) == (len(expected), 8 << 20, True)
    assert (tmp_path / "cap" / "stdout.log").read_bytes() == expected[: 8 << 20]


@pytest.mark.parametrize("closed", [0, 1, 2], ids=["stdin", "stdout", "stderr"])
def test_a_runner_started_with_a_closed_standard_descriptor_keeps_the_jsonl_clean(tmp_path, closed):
    """Were fd 0-2 left closed, the JSONL file would take that number and receive the echo."""
    jsonl = tmp_path / "run.jsonl"
    child = "echo to-stdout; echo to-stderr >&2; exit 4"
    proc = subprocess.run(
        cli_command() + ["run", "--jsonl", str(jsonl), "--", "sh", "-c", child],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SAFETY_NET,
        preexec_fn=lambda: os.close(closed),
    )
    assert proc.returncode == 4, proc.stderr
    check_stream(jsonl, 4)  # every line is an event: no echoed bytes in between
    assert proc.stdout == (b"" if closed == 1 else b"to-stdout\n")
    assert proc.stderr == (b"" if closed == 2 else b"to-stderr\n")


def test_paths_that_are_not_utf8_are_rendered_lossily(tmp_path):
    """The stream stays UTF-8: an undecodable path byte becomes U+FFFD, as the reference does."""
    odd = bytes(tmp_path) + b"/caf\xe9"
    os.mkdir(odd)
    jsonl = tmp_path / "run.jsonl"
    cmd = [os.fsencode(a) for a in cli_command()] + [
        b"run",
        b"--jsonl",
        bytes(jsonl),
        b"--capture-dir",
        b"cap\xff",
        b"--",
        b"true",
    ]
    proc = subprocess.run(cmd, cwd=odd, stdin=subprocess.DEVNULL, capture_output=True, timeout=SAFETY_NET)
    events = check_stream(jsonl, proc.returncode)  # decodes the file as strict UTF-8
    assert one(events, "run_started")["cwd"] == f"{tmp_path}/caf\ufffd"
    assert one(events, "output_captured")["stdout"]["path"] == "cap\ufffd/stdout.log"


def test_events_never_reach_stdout(tmp_path):
    proc = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--", "true")
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    assert len(check_stream(tmp_path / "run.jsonl", 0)) == 7


def test_jsonl_dash_is_a_file_named_dash_and_says_so(tmp_path):
    """``--jsonl -`` is the reference's path, a file named ``-`` (events never go to stdout): an
    agent that took it for stdout found no event there and no word why. A warning says so, in
    human mode only; the file is written as ever."""
    proc = run_cli("run", "--jsonl", "-", "--", "true", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == b"", proc.stderr
    assert b"--jsonl - writes the events to a file named '-' in the working directory" in proc.stderr
    assert b'"event":"runner_exit"' in (tmp_path / "-").read_bytes()
    quiet = run_cli("--error-format", "json", "run", "--jsonl", "-", "--", "true", cwd=tmp_path)
    assert (quiet.returncode, quiet.stderr) == (0, b"")
