"""Runs given one ``--capture-dir`` at once (an agent's parallel runs with one flag set): each
emptied the files and wrote its own bytes into them at its own offsets, and each reported
``sha256`` and ``bytes_written`` of its own bytes, so a file that held another run's (or a mix)
was named by two records as exactly theirs, all exits 0. Now a run holds its capture files as
it holds its stream (an exclusive lock of each file's open file description, taken without
waiting, let go when the files close): a second run, foreground, detached or through the API, is refused
before it empties anything (111, one line naming the file), the first's files stay exactly what
its record says, and once it has ended the directory is anyone's again."""

from __future__ import annotations

import hashlib
import json
import os
import sys

from conftest import SAFETY_NET, UNTIL_RELEASED, run_cli, start_cli, wait_for_event

# What the first run's child writes before it waits for the release.
TAGGED = "os.write(1, b'A' * 1000)\nos.write(2, b'err')\n"


def _output_captured(stream) -> dict:
    return next(
        event for event in map(json.loads, stream.read_text().splitlines()) if event["event"] == "output_captured"
    )


def test_a_second_run_capturing_into_a_directory_in_use_is_refused_and_the_first_stays_exact(tmp_path):
    release = tmp_path / "release"
    first = start_cli(
        "run", "--jsonl", "first.jsonl", "--capture-dir", "cap", "--no-echo", "--",
        sys.executable, "-c", UNTIL_RELEASED.replace("\n", "\n" + TAGGED, 1), str(release),
        cwd=tmp_path,
    )  # fmt: skip
    try:
        wait_for_event(tmp_path / "first.jsonl", "run_started")
        second = run_cli(
            "--error-format", "json", "run", "--jsonl", "second.jsonl", "--capture-dir", "cap", "--",
            sys.executable, "-c", "print('B' * 1000)",
            cwd=tmp_path,
        )  # fmt: skip
        from processkit import run

        api = run([sys.executable, "-c", "print('C' * 1000)"], capture_dir=str(tmp_path / "cap"))
        detached = run_cli("run", "--detach", "--jsonl", "d.jsonl", "--capture-dir", "cap", "--", "true", cwd=tmp_path)
    finally:
        release.touch()
        _, err = first.communicate(timeout=SAFETY_NET)
    said = second.stderr.decode()
    assert (second.returncode, said.count("\n")) == (111, 1), said
    envelope = json.loads(said)
    assert (envelope["code"], envelope["kind"]) == (111, "setup"), envelope
    assert envelope["message"].startswith(
        "could not set up output capture in `cap`: stdout.log there: a process holds a lock on it"
    ), envelope
    assert api.returncode == 111 and "a process holds a lock on it" in api.message, api.message
    assert detached.returncode == 111 and b"stdout.log there: a process holds a lock" in detached.stderr, (
        detached.stderr
    )
    assert first.returncode == 0, err
    record = _output_captured(tmp_path / "first.jsonl")
    for name, expected in (("stdout", b"A" * 1000), ("stderr", b"err")):
        held = (tmp_path / "cap" / f"{name}.log").read_bytes()
        assert held == expected, (name, held[:20])
        assert record[name]["sha256"] == hashlib.sha256(held).hexdigest(), record
    again = run_cli("run", "--jsonl", "again.jsonl", "--capture-dir", "cap", "--", "true", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "cap" / "stdout.log").read_bytes() == b""


def test_sequential_api_runs_reuse_one_capture_dir(tmp_path):
    # The service reads a run's capture back through a copy of the run's descriptor (one open
    # file description, so the run's lock lives on in it) and closes that copy once it has
    # replied: the lock is gone before the caller's next run opens the directory, not refused.
    from processkit import run

    for tag in "XY":
        done = run([sys.executable, "-c", f"print('{tag}')"], capture_dir=str(tmp_path / "cap"))
        assert done.returncode == 0, done.message
        assert (tmp_path / "cap" / "stdout.log").read_bytes() == f"{tag}\n".encode()


def test_capture_files_that_are_one_file_are_refused_by_name(tmp_path):
    # stderr.log a hard link to stdout.log: both streams wrote from offset 0 into one file, the
    # later bytes over the earlier, each digest its own stream's; now refused in its own words.
    capture = tmp_path / "cap"
    capture.mkdir()
    (capture / "stdout.log").write_bytes(b"")
    os.link(capture / "stdout.log", capture / "stderr.log")
    done = run_cli(
        "run", "--jsonl", "run.jsonl", "--capture-dir", "cap", "--", "sh", "-c", "echo out; echo err >&2", cwd=tmp_path
    )
    said = done.stderr.decode()
    assert (done.returncode, said) == (
        111,
        "processkit-cli: could not set up output capture in `cap`: stderr.log there is stdout.log\n",
    )


def test_a_batchs_failed_job_files_are_written_whatever_locks_them(tmp_path):
    # ``--keep failed`` writes a failed job's capture into the ``--out`` the batch holds alone,
    # taking no run's lock on it: a run's lock there refused it (a warning, the files not written).
    import fcntl
    import struct

    def batch(word: str):
        command = ("sh", "-c", f"echo {word}; exit 3", ":::", "a")
        return run_cli("batch", "--out", "out", "--keep", "failed", "--", *command, cwd=tmp_path)

    assert batch("first").returncode == 117
    stdout_log = tmp_path / "out" / "a" / "capture" / "stdout.log"
    held = os.open(stdout_log, os.O_RDWR)
    try:
        fcntl.fcntl(held, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        again = batch("second")
    finally:
        os.close(held)
    assert (again.returncode, stdout_log.read_bytes()) == (117, b"second\n"), again.stderr
