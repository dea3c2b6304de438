"""Two runs given one ``--jsonl`` at once: the second emptied the first's stream and both wrote
into it (lines of two runs, the first's ``run_started`` gone). A run holds its stream's file
alone (an exclusive lock of its open file description, taken without waiting, held until its
stream closes): a second foreground run goes on without a stream (one warning, its events
written nowhere: tests/test_shared_jsonl_runs.py), a detached one is refused before it writes or
empties anything (111, one line, as an ``--jsonl`` that cannot be opened), and the first's stream
stays whole. Once the first has ended, the path is anyone's again; a device (``/dev/null``) is
shared as before, and so is a file the caller handed over (``--jsonl /dev/stdout`` of runs
sharing one redirect to a file: the caller's choice). The lock is an open file description's
(``F_OFD_SETLK``), not a ``flock``: a ``flock`` the caller holds on the file (``flock FILE
processkit-cli run --jsonl FILE``) is no run writing it. Both with the C module and without it
(an install built without a C compiler)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys

import pytest
from conftest import SAFETY_NET, UNTIL_RELEASED, cli_command, cli_without_native, run_cli, start_cli, wait_for_event


def _refused(proc: subprocess.CompletedProcess) -> None:
    said = proc.stderr.decode()
    assert (proc.returncode, said.count("\n")) == (111, 1), said
    assert "could not open the JSONL events file `shared.jsonl`: a process holds a lock on it" in said, said


def test_a_second_run_on_a_stream_in_use_writes_none_of_it_and_the_first_stays_whole(tmp_path):
    stream, release = tmp_path / "shared.jsonl", tmp_path / "release"
    first = start_cli(
        "run", "--jsonl", "shared.jsonl", "--run-id", "first", "--", sys.executable, "-c", UNTIL_RELEASED, str(release),
        cwd=tmp_path,
    )  # fmt: skip
    try:
        wait_for_event(stream, "run_started")
        second = run_cli("run", "--jsonl", "shared.jsonl", "--run-id", "second", "--", "echo", "second", cwd=tmp_path)
        assert (second.returncode, second.stdout) == (0, b"second\n"), second.stderr
        assert second.stderr.decode().count("JSONL event logging disabled") == 1, second.stderr
        # A detached run is refused: its launcher proves the start by the run_started in this file.
        _refused(run_cli("run", "--detach", "--jsonl", "shared.jsonl", "--", "true", cwd=tmp_path))
        beside = run_cli("run", "--jsonl", "/dev/null", "--", "true", cwd=tmp_path)
        assert beside.returncode == 0, beside.stderr
    finally:
        release.touch()
        _, err = first.communicate(timeout=SAFETY_NET)
    assert first.returncode == 0, err
    events = [json.loads(line) for line in stream.read_text().splitlines()]
    assert {event.get("run_id", "first") for event in events} == {"first"}, events
    assert (events[0]["event"], events[-1]["event"]) == ("run_started", "runner_exit"), events
    again = run_cli("run", "--jsonl", "shared.jsonl", "--run-id", "again", "--", "true", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(stream.read_text().splitlines()[0])["run_id"] == "again"


def test_a_run_refused_by_its_capture_never_says_it_went_on_without_its_stream(tmp_path):
    """The first run holds both its ``--jsonl`` and its ``--capture-dir``; a second given both is
    refused by its capture setup (111): its one line is that refusal, never the stream's warning
    before it (which said the run went on). One given a capture directory of its own goes on,
    and says the warning once."""
    stream, release = tmp_path / "shared.jsonl", tmp_path / "release"
    flags = ("run", "--jsonl", "shared.jsonl", "--capture-dir")
    first = start_cli(*flags, "cap", "--", sys.executable, "-c", UNTIL_RELEASED, str(release), cwd=tmp_path)
    try:
        wait_for_event(stream, "run_started")
        refused = run_cli(*flags, "cap", "--", "true", cwd=tmp_path)
        assert (refused.returncode, refused.stderr.decode()) == (
            111,
            "processkit-cli: could not set up output capture in `cap`: stdout.log there: a process holds a lock"
            " on it: another run capturing into it, or a program that locked it (one capture, one run)\n",
        )
        own = run_cli(*flags, "own", "--", "true", cwd=tmp_path)
        said = own.stderr.decode()
        assert (own.returncode, said.count("\n"), said.count("JSONL event logging disabled")) == (0, 1, 1), said
    finally:
        release.touch()
        _, err = first.communicate(timeout=SAFETY_NET)
    assert first.returncode == 0, err
    assert json.loads(stream.read_text().splitlines()[-1])["event"] == "runner_exit"


def test_runs_sharing_a_handed_over_file_as_their_stream_all_run(tmp_path):
    # { run --jsonl /dev/stdout ... & run --jsonl /dev/stdout ... & wait; } > log
    log, release = tmp_path / "log", tmp_path / "release"
    with open(log, "wb") as out:
        first = start_cli(
            "run", "--jsonl", "/dev/stdout", "--run-id", "first", "--", sys.executable, "-c", UNTIL_RELEASED,
            str(release), stdout=out,
        )  # fmt: skip
        try:
            wait_for_event(log, "run_started")
            second = subprocess.run(
                [*cli_command(), "run", "--jsonl", "/dev/stdout", "--run-id", "second", "--", "true"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, timeout=SAFETY_NET,
            )  # fmt: skip
        finally:
            release.touch()
            _, err = first.communicate(timeout=SAFETY_NET)
    assert second.returncode == 0, second.stderr
    assert first.returncode == 0, err


@pytest.mark.parametrize("native", [True, False], ids=["native", "no-native"])
def test_a_flock_the_caller_holds_on_the_stream_is_no_run_writing_it(tmp_path, native):
    # flock FILE processkit-cli run --jsonl FILE: flock(1) holds a flock on FILE while the run goes
    stream = tmp_path / "stream.jsonl"
    held = os.open(stream, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        command = cli_command() if native else cli_without_native()
        done = subprocess.run(
            [*command, "run", "--jsonl", str(stream), "--", "true"], capture_output=True, timeout=SAFETY_NET
        )
    finally:
        os.close(held)
    assert done.returncode == 0, done.stderr
    assert json.loads(stream.read_text().splitlines()[0])["event"] == "run_started"


def test_a_stream_read_back_after_its_run_holds_no_lock(tmp_path):
    # The API's service reads a run's stream back through a copy of its descriptor until it has
    # replied (``Emitter.reader``, closed with the request): the run over, its lock went with
    # the stream's close, so a run its caller starts on that reply is not refused meanwhile.
    from processkit.events.emitter import Emitter, open_stream

    stream = tmp_path / "api.jsonl"
    emitter = Emitter(str(stream), readable=True)
    kept = emitter.reader()
    emitter.close()
    try:
        fd, _ = open_stream(str(stream))
        os.close(fd)
    finally:
        os.close(kept)


def test_a_lock_a_program_holds_on_the_stream_is_said_as_a_lock_not_as_a_run(tmp_path):
    """A program's ``fcntl`` lock on the file (``lockf``: not a run's) keeps the run out of the
    file as a run writing it does, before it empties anything (the run goes on without it), and
    the words say what was found: a lock some process holds on it (they said another run was
    writing it)."""
    stream = tmp_path / "shared.jsonl"
    stream.write_text("the program's\n")
    held = os.open(stream, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.lockf(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = run_cli("run", "--jsonl", "shared.jsonl", "--", "true", cwd=tmp_path)
    finally:
        os.close(held)
    said = done.stderr.decode()
    assert (done.returncode, said.count("\n")) == (0, 1), said
    assert "disabled: could not open the JSONL events file `shared.jsonl`: a process holds a lock on it" in said
    assert "another run is writing it" not in said, said
    assert stream.read_text() == "the program's\n"


def test_under_json_errors_a_run_without_its_stream_still_says_so_and_the_envelope_comes_last(tmp_path):
    """``--error-format json`` wrote no warning (docs/differences.md), so a later run whose stream
    another run holds went on without it and exited 0 with no word at all. The reference writes
    its warnings as prose beside the envelope (docs/differences.md), this one too: said here as well,
    before the envelope of a run that then fails (a timeout, 106), which stays the last line."""
    stream, release = tmp_path / "shared.jsonl", tmp_path / "release"
    first = start_cli(
        "run", "--jsonl", "shared.jsonl", "--", sys.executable, "-c", UNTIL_RELEASED, str(release), cwd=tmp_path
    )
    try:
        wait_for_event(stream, "run_started")
        went_on = run_cli("--error-format", "json", "run", "--jsonl", "shared.jsonl", "--", "true", cwd=tmp_path)
        timed_out = run_cli(
            "--error-format", "json", "run", "--jsonl", "shared.jsonl", "--timeout", "100ms", "--", "sleep", "30",
            cwd=tmp_path,
        )  # fmt: skip
    finally:
        release.touch()
        _, err = first.communicate(timeout=SAFETY_NET)
    assert first.returncode == 0, err
    said = "processkit-cli: warning: JSONL event logging disabled: could not open the JSONL events file `shared.jsonl`"
    lines = went_on.stderr.decode().splitlines()
    assert went_on.returncode == 0 and len(lines) == 1 and lines[0].startswith(said), went_on.stderr
    lines = timed_out.stderr.decode().splitlines()
    assert timed_out.returncode == 106 and len(lines) == 2 and lines[0].startswith(said), timed_out.stderr
    assert json.loads(lines[1])["kind"] == "timeout", lines
