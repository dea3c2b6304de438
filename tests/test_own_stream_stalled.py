"""The runner's own lines never hold it on a stream nobody reads (``diagnostics.say``), and never
cut what a reader merely paused or slow to start would read (``writeall.write_own``).

A stream whose live echo the runner gave up as stalled (a pipe the test holds open but never
reads until the runner exits, filled by the child's echo) gets the runner's later lines in one
write that does not wait: the warning that says so and the ``--error-format json`` envelope once
waited in a blocking ``write`` for ever. Any other stream, a terminal paused by ^S or a full pipe
whose reader comes late, gets them whole, waited for as a blocking write waits. The echo's bound
is made short here (``teardown.ECHO_STALL_SECONDS``): only the hang tests wait it out."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess

from conftest import SAFETY_NET, patched_cli
from streams import waits_in_write

FILL = "head -c 200000 /dev/zero >&2"  # past any pipe's buffer
SET_PIPE_SIZE = 1031  # F_SETPIPE_SZ


def _cli(*args) -> list[str]:
    return patched_cli("teardown", "ECHO_STALL_SECONDS", "0.3") + [str(arg) for arg in args]


def _drained(fd: int) -> bytes:
    """What the pipe ``fd`` holds now (its writers may still hold it open)."""
    os.set_blocking(fd, False)
    held = bytearray()
    try:
        while chunk := os.read(fd, 1 << 20):
            held += chunk
    except BlockingIOError:
        pass  # all the pipe held: a grandchild that outlived the kill may keep its end open
    return bytes(held)


def _with_unread(stream: str, *args, stderr=subprocess.DEVNULL) -> tuple[int, bytes]:
    """The exit code of ``processkit-cli ARGS`` whose ``stream`` is a pipe read only once it
    ended (stderr, unless that is the stream, to ``stderr``: None, that same pipe), and what that
    pipe held then."""
    read_end, write_end = os.pipe()
    try:
        streams = {"stdout": subprocess.DEVNULL, "stderr": write_end if stderr is None else stderr, stream: write_end}
        process = subprocess.Popen(_cli(*args), stdin=subprocess.DEVNULL, **streams)
        os.close(write_end)
        try:
            code = process.wait(timeout=SAFETY_NET)
        finally:
            if process.returncode is None:
                process.kill()
                process.wait()
        return code, _drained(read_end)
    finally:
        os.close(read_end)


def _read_once_waiting(process: subprocess.Popen, fd: int, read_end: int) -> bytes:
    """All the pipe ``read_end`` gets, read from once ``process`` waits in a write to its ``fd``
    (asserted: it did not drop its words and end), to its end."""
    try:
        assert waits_in_write(process, fd)
        held = bytearray()
        while chunk := os.read(read_end, 1 << 16):
            held += chunk
        return bytes(held)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


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
    command = _cli("run", "--jsonl", tmp_path / "run.jsonl", "--error-format", "json", "--timeout", "1s")
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


def test_the_json_envelope_waits_for_a_reader_that_comes_late(tmp_path):
    """A stderr pipe full of another's bytes, no echo given up: the envelope waits for the reader."""
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(write_end, False)
        try:
            while os.write(write_end, b"x" * 65536):
                pass
        except BlockingIOError:
            pass
        os.set_blocking(write_end, True)
        command = _cli("run", "--jsonl", tmp_path / "run.jsonl", "--error-format", "json", "--timeout", "1s")
        process = subprocess.Popen(
            [*command, "--", "sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=write_end
        )
        os.close(write_end)
        held = _read_once_waiting(process, 2, read_end)  # not given up past the echo's bound
    finally:
        os.close(read_end)
    assert process.returncode == 106
    envelope = json.loads(held.lstrip(b"x").strip(b"\n").decode())
    assert (envelope["code"], envelope["kind"]) == (106, "timeout")


def test_a_bench_export_waits_for_a_reader_that_comes_late(tmp_path):
    read_end, write_end = os.pipe()
    try:
        fcntl.fcntl(write_end, SET_PIPE_SIZE, 4096)  # one page: the export is longer
        with open(tmp_path / "stderr", "wb") as stderr:
            process = subprocess.Popen(
                _cli("bench", "--runs", "40", "--style", "none", "--export-json", "-", "--", "true"),
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=stderr,
            )
        os.close(write_end)
        held = _read_once_waiting(process, 1, read_end)
    finally:
        os.close(read_end)
    assert process.returncode == 0, (tmp_path / "stderr").read_text()
    assert len(json.loads(held)["results"][0]["times"]) == 40


def _header_then_echo(held: bytes) -> bool:
    """The ``Benchmark 1:`` line (hyperfine's, before the runs), then the echo's bytes alone: the
    printout after the runs cut whole."""
    header, _, echoed = held.partition(b"\n")
    return header.startswith(b"Benchmark 1: ") and echoed != b"" and echoed == bytes(len(echoed))


def test_benchs_printout_never_holds_it_on_a_stdout_its_echo_filled(tmp_path):
    with open(tmp_path / "stderr", "wb") as stderr:
        code, held = _with_unread(
            "stdout", "bench", "--runs", "1", "--show-output", "--", "sh", "-c", FILL.replace(" >&2", ""), stderr=stderr
        )
    assert code == 0
    assert _header_then_echo(held), held[:200]
    said = (tmp_path / "stderr").read_text()
    assert "warning: the reader of stdout took nothing for 0.3s: the results were cut after 0 of " in said, said


def test_benchs_cut_printout_fails_where_its_warning_cannot_be_said():
    """stdout and stderr one pipe nobody reads (``2>&1``), filled by the echo: the warning of the
    cut is cut too, so the exit code says it (a failed write of stdout), where it was 0."""
    code, held = _with_unread("stdout", "bench", "--runs", "1", "--show-output", "--", "sh", "-c", FILL, stderr=None)
    assert code == 111
    assert _header_then_echo(held), held[:200]


def test_benchs_cut_printout_is_the_json_envelope_under_error_format_json(tmp_path):
    """``--error-format json`` writes no warning: the cut is the envelope (111), where it was 0."""
    with open(tmp_path / "stderr", "wb") as stderr:
        code, _ = _with_unread(
            "stdout",
            "--error-format",
            "json",
            "bench",
            "--runs",
            "1",
            "--show-output",
            "--",
            "sh",
            "-c",
            FILL.replace(" >&2", ""),
            stderr=stderr,
        )
    assert code == 111
    envelope = json.loads((tmp_path / "stderr").read_bytes())
    assert envelope["code"] == 111 and "the results were cut after 0 of " in envelope["message"], envelope


def test_benchs_cut_printout_still_rolls_its_baseline_forward(tmp_path):
    """The 111 of a printout cut with its warning (``2>&1`` into one pipe nobody reads) is raised
    once the final exports are written: the baseline rolls forward, as it did when it was 0."""
    roll = tmp_path / "roll.json"
    command = ("sh", "-c", FILL)
    first = subprocess.run(
        _cli("bench", "--runs", "1", "--style", "none", "--output", "null", "--export-json", roll, "--", *command),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SAFETY_NET,
    )
    assert first.returncode == 0, first.stderr
    before = roll.read_bytes()
    args = ("bench", "--runs", "1", "--show-output", "--baseline", roll, "--export-json", roll, "--", *command)
    code, _ = _with_unread("stdout", *args, stderr=None)
    assert code == 111
    assert roll.read_bytes() != before  # rolled: this benchmark's figures
