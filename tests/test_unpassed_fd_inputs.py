"""An input path naming a descriptor (``--stdin-file /dev/fd/N``, ``/proc/self/fd/N``, an
``--env-file`` so, or a link to one) that the caller never passed: the runner opened whatever it
held itself under N at that moment, and the child read the run's own ``stdout.log``, its event
stream (a detached copy's JSONL at 7), or in the API's service another call's file. Refused now
(111, one line); a descriptor the caller passed is still read, foreground and detached."""

from __future__ import annotations

import os
import subprocess

import pytest

import processkit
from conftest import SAFETY_NET, cli_command, run_cli, wait_for_event

PAYLOAD = b"the caller's own input\n"


def _refused(proc: subprocess.CompletedProcess, fd: int) -> None:
    said = proc.stderr.decode()
    assert (proc.returncode, said.count("\n")) == (111, 1), said
    assert f"descriptor {fd} was not passed to the runner" in said


# fds 3-5: what the runner itself holds as the path is opened (its stream, a capture file); the
# caller (subprocess: close_fds) passes none of them.
@pytest.mark.parametrize("named", ["/dev/fd/{fd}", "/proc/self/fd/{fd}"])
@pytest.mark.parametrize("fd", [3, 4, 5])
def test_a_stdin_file_naming_the_runners_own_descriptor_is_refused(tmp_path, named, fd):
    proc = run_cli(
        "run", "--jsonl", "r.jsonl", "--capture-dir", "cap", "--stdin-file", named.format(fd=fd), "--", "cat",
        cwd=tmp_path,
    )  # fmt: skip
    _refused(proc, fd)
    assert not (tmp_path / "cap" / "stdout.log").exists() or not (tmp_path / "cap" / "stdout.log").read_bytes()


def test_a_link_to_a_descriptor_and_an_env_file_are_refused_so(tmp_path):
    (tmp_path / "link").symlink_to("/dev/fd/3")
    proc = run_cli("run", "--jsonl", "r.jsonl", "--stdin-file", "link", "--", "cat", cwd=tmp_path)
    _refused(proc, 3)
    proc = run_cli("run", "--jsonl", "r.jsonl", "--env-file", "/dev/fd/3", "--", "true", cwd=tmp_path)
    _refused(proc, 3)


def test_a_descriptor_nothing_holds_fails_as_a_missing_file(tmp_path):
    """docs/io-modes.md: a number where the runner holds nothing is no file of its own to name."""
    proc = run_cli("run", "--jsonl", "r.jsonl", "--stdin-file", "/dev/fd/200", "--", "cat", cwd=tmp_path)
    said = proc.stderr.decode()
    assert (proc.returncode, said.count("\n")) == (111, 1), said
    assert "`/dev/fd/200`: No such file or directory (os error 2)" in said


def test_a_detached_stdin_file_naming_a_descriptor_not_passed_is_refused(tmp_path):
    """The copy held its JSONL at 7: ``cap/stdout.log`` got the run's own event stream, exit 0."""
    proc = run_cli(
        "run", "--detach", "--jsonl", "c.jsonl", "--capture-dir", "cap", "--stdin-file", "/dev/fd/7", "--", "cat",
        cwd=tmp_path,
    )  # fmt: skip
    _refused(proc, 7)


def _with_passed(tmp_path, fd: int, data: bytes, *args: str) -> subprocess.CompletedProcess:
    """``processkit-cli ARGS`` with ``data`` readable at ``fd``, which the caller passes."""
    source = tmp_path / "given"
    source.write_bytes(data)
    opened = os.open(source, os.O_RDONLY)
    try:
        os.dup2(opened, fd, inheritable=True) if opened != fd else None
        return subprocess.run(
            [*cli_command(), *args], cwd=tmp_path, pass_fds=(fd,), capture_output=True, timeout=SAFETY_NET
        )
    finally:
        os.close(fd)
        if opened != fd:
            os.close(opened)


def test_a_descriptor_the_caller_passed_is_still_read(tmp_path):
    fd = os.dup(0)  # a number free in this process, closed again by ``_with_passed``
    os.close(fd)
    proc = _with_passed(
        tmp_path, fd, PAYLOAD, "run", "--jsonl", "r.jsonl", "--stdin-file", f"/proc/self/fd/{fd}", "--", "cat"
    )
    assert (proc.returncode, proc.stdout) == (0, PAYLOAD), proc.stderr
    env_line = b"GIVEN_TOKEN=passed\n"
    command = ["sh", "-c", 'printf %s "$GIVEN_TOKEN"']
    proc = _with_passed(
        tmp_path, fd, env_line, "run", "--jsonl", "r.jsonl", "--env-file", f"/dev/fd/{fd}", "--", *command
    )
    assert (proc.returncode, proc.stdout) == (0, b"passed"), proc.stderr
    args = ["run", "--detach", "--jsonl", "d.jsonl", "--capture-dir", "cap", "--stdin-file", f"/dev/fd/{fd}"]
    proc = _with_passed(tmp_path, fd, PAYLOAD, *args, "--", "cat")
    assert (proc.returncode, proc.stderr) == (0, b"")
    wait_for_event(tmp_path / "d.jsonl", "runner_exit")
    assert (tmp_path / "cap" / "stdout.log").read_bytes() == PAYLOAD


def test_the_api_service_never_reads_its_own_descriptors(tmp_path):
    """``/dev/fd/N`` names the calling process's descriptor and is read; a link to it is followed
    by the service, in its own /proc entry, where N is the service's own (its scratch file,
    another call's memfd, a lock): refused whatever it holds there, never fed to the child."""
    source = tmp_path / "given"
    source.write_bytes(PAYLOAD)
    fd = os.open(source, os.O_RDONLY)
    try:
        result = processkit.run(["cat"], stdin_file=f"/dev/fd/{fd}", capture_output=True)
    finally:
        os.close(fd)
    assert (result.returncode, result.stdout) == (0, PAYLOAD)
    for number in range(3, 13):
        link = tmp_path / f"link{number}"
        link.symlink_to(f"/dev/fd/{number}")
        result = processkit.run(["cat"], stdin_file=str(link), capture_output=True, timeout=SAFETY_NET)
        assert (result.returncode, result.stdout) == (111, b""), (number, result.stdout)
