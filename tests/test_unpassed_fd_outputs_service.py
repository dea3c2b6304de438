"""An output path naming a descriptor (``jsonl=``, ``--jsonl``, a capture file, a link to
``/dev/fd/N``) that the caller never passed: the runner wrote into whatever it held itself under
N. In the API's service that was another call's memfd, a lock, its own pipe: a call whose
``jsonl=`` was a link to ``/dev/fd/N`` (or ``/proc/<service>/fd/N``) wrote its events over
another thread's captured output, and that call's ``stdout`` came back as them. Refused now
(111, ``descriptor N was not passed to the runner``); a descriptor the caller passed is still
written."""

from __future__ import annotations

import os
import subprocess
import threading

import processkit
from conftest import SAFETY_NET, cli_command, read_events, run_cli, wait_for_file

OWN_OUTPUT = b"the other call's own output\n"


def test_a_jsonl_naming_the_services_own_descriptor_is_refused_and_spoils_no_other_call(tmp_path):
    ready = tmp_path / "ready"
    read_end, write_end = os.pipe()  # the other call's child waits on it: closed, it ends
    held: dict = {}

    def other_call() -> None:  # its capture is held in a memfd of the service until it ends
        held["result"] = processkit.run(
            ["sh", "-c", 'printf "%s" "$1"; : > "$2"; cat >/dev/null', "sh", OWN_OUTPUT.decode(), str(ready)],
            stdin=read_end,
            capture_output=True,
            timeout=SAFETY_NET,
        )

    thread = threading.Thread(target=other_call)
    thread.start()
    try:
        wait_for_file(ready)
        service = processkit.run(["true"]).runner_pid
        for number in range(3, 64):  # what the service holds: its own, the other call's (none open: ENOENT)
            link = tmp_path / f"link{number}"
            link.symlink_to(f"/dev/fd/{number}")
            for jsonl in (str(link), f"/proc/{service}/fd/{number}"):
                result = processkit.run(["true"], jsonl=jsonl, timeout=SAFETY_NET)
                assert result.returncode == 111, (jsonl, result.returncode)
                refused = f"descriptor {number} was not passed to the runner" in result.message
                assert refused or "No such file or directory" in result.message, result.message
    finally:
        os.close(write_end)
        thread.join(SAFETY_NET)
        os.close(read_end)
    assert (held["result"].returncode, held["result"].stdout) == (0, OWN_OUTPUT)


def test_a_jsonl_at_a_descriptor_the_caller_passed_is_still_written(tmp_path):
    """The API's ``/dev/fd/N`` is the calling process's own; the CLI's one its caller handed it."""
    target = tmp_path / "mine.jsonl"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        assert processkit.run(["true"], jsonl=f"/dev/fd/{fd}").returncode == 0
        assert read_events(target)[-1]["event"] == "runner_exit"
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        proc = subprocess.run(
            [*cli_command(), "run", "--jsonl", f"/proc/self/fd/{fd}", "--", "true"],
            pass_fds=(fd,),
            capture_output=True,
            timeout=SAFETY_NET,
        )
        assert (proc.returncode, proc.stderr) == (0, b"")
        assert read_events(target)[-1]["event"] == "runner_exit"
    finally:
        os.close(fd)


def test_a_capture_file_linked_to_the_runners_own_descriptor_is_refused(tmp_path):
    (tmp_path / "cap").mkdir()
    (tmp_path / "cap" / "stderr.log").symlink_to("/dev/fd/3")
    proc = run_cli("run", "--jsonl", "r.jsonl", "--capture-dir", "cap", "--", "true", cwd=tmp_path)
    said = proc.stderr.decode()
    assert (proc.returncode, said.count("\n")) == (111, 1), said
    assert "descriptor 3 was not passed to the runner" in said
