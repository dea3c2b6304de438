"""The runner's own lines never hold it on a stream nobody reads (``diagnostics.say``).

The runner's stderr is a pipe the test holds open but never reads until the runner exits. The
child's echo fills it and is given up as stalled; the warning that says so, and the
``--error-format json`` envelope, once waited in a blocking ``write`` for ever. Now they are
dropped once the reader took nothing for the echo's own bound, and the exit code is the run's."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import SAFETY_NET, cli_command

FILL = "head -c 200000 /dev/zero >&2"  # past any pipe's buffer


def _with_unread(stream: str, *args) -> tuple[int, bytes]:
    """The exit code of ``processkit-cli ARGS`` whose ``stream`` is a pipe read only once it
    ended (the other one not kept), and what that pipe held then."""
    read_end, write_end = os.pipe()
    try:
        streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: write_end}
        process = subprocess.Popen(cli_command() + list(args), stdin=subprocess.DEVNULL, **streams)
        os.close(write_end)
        try:
            code = process.wait(timeout=SAFETY_NET)
        finally:
            if process.returncode is None:
                process.kill()
                process.wait()
        os.set_blocking(read_end, False)
        held = bytearray()
        try:
            while chunk := os.read(read_end, 1 << 20):
                held += chunk
        except BlockingIOError:
            pass  # all the pipe held: a grandchild that outlived the kill may keep its end open
        return code, bytes(held)
    finally:
        os.close(read_end)


def _run(tmp_path, *args) -> tuple[int, bytes]:
    return _with_unread("stderr", "run", "--jsonl", tmp_path / "run.jsonl", *args)


def test_a_human_run_ends_with_its_code_when_its_stderr_is_never_read(tmp_path):
    code, held = _run(tmp_path, "--", "sh", "-c", FILL)
    assert code == 0
    assert held.startswith(bytes(4096))  # the child's echo, as far as the pipe took it


def test_the_json_envelope_never_holds_a_failed_run_on_an_unread_stderr(tmp_path):
    code, held = _run(tmp_path, "--error-format", "json", "--timeout", "1s", "--", "sh", "-c", f"{FILL}; exec sleep 60")
    assert code == 106
    assert held.startswith(bytes(4096))


def test_the_json_envelope_is_written_whole_to_a_reader_that_reads(tmp_path):
    command = cli_command() + [
        "run",
        "--jsonl",
        str(tmp_path / "run.jsonl"),
        "--error-format",
        "json",
        "--timeout",
        "1s",
    ]
    ran = subprocess.run(
        [*command, "--", "sh", "-c", f"{FILL}; exec sleep 60"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SAFETY_NET,
    )
    assert ran.returncode == 106
    assert ran.stderr.startswith(bytes(200000))
    envelope = json.loads(ran.stderr[200000:].strip(b"\n").decode())
    assert (envelope["code"], envelope["kind"]) == (106, "timeout")


def test_benchs_printout_never_holds_it_on_a_stdout_its_echo_filled():
    code, held = _with_unread(
        "stdout", "bench", "--runs", "1", "--show-output", "--", "sh", "-c", FILL.replace(" >&2", "")
    )
    assert code == 0
    assert held.startswith(bytes(4096))
