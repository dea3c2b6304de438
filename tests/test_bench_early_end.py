"""A benchmark that ends early (a later command fails, a stop signal) keeps the blocks of the
commands that finished on stdout: in sequential order each command's ``Benchmark N:`` line is
printed as it begins and the rest of its block once it is over, as hyperfine prints them, not all
of them at the end."""

from __future__ import annotations

import json
import os
import signal

import pytest

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_file

# a command whose second timed run says it began (``started``) and hangs until stopped
HANGS_SECOND_RUN = ["sh", "-c", '[ "$HYPERFINE_ITERATION" != 1 ] || { touch started; exec sleep 30; }']


def test_a_failing_second_command_leaves_the_first_ones_block(tmp_path):
    done = run_cli("bench", "--order", "sequential", "--runs", "3", "sleep 0.05", "false", cwd=tmp_path)
    assert done.returncode == 118, done.stderr
    shown = done.stdout.decode()
    assert "Benchmark 1: sleep 0.05\n  Time (mean ± σ):" in shown, shown
    assert "3 runs" in shown and shown.endswith("\n\nBenchmark 2: false\n"), shown  # its header alone, hyperfine's
    assert b"the command 'false' exited with 1" in done.stderr


@pytest.mark.parametrize(("stop", "returncode"), [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 107)])
def test_a_stop_after_the_first_command_leaves_its_block(tmp_path, stop, returncode):
    """The second command's first run says it began (``started``): the first command is over by
    then, so its block is on stdout before the stop."""
    second = "touch started; exec sleep 30"
    stdout, stderr = _stopped_once_started(
        tmp_path, stop, returncode,
        "bench", "--order", "sequential", "--runs", "10", "-N", "true", "--command", f'["sh", "-c", "{second}"]',
    )  # fmt: skip
    shown = stdout.decode()
    assert shown.startswith("Benchmark 1: true\n  Time (mean ± σ):"), shown
    assert "10 runs" in shown and shown.endswith("\n\nBenchmark 2: sh -c 'touch started; exec sleep 30'\n"), shown
    assert stderr.decode().splitlines()[-1].startswith("processkit-cli: benchmark stopped during \"sh -c '"), stderr


def test_a_closed_stdout_still_runs_and_exports_every_command(tmp_path):
    """A block that cannot be written stops no benchmark: both commands run and are exported,
    and the closed stdout ends it as before (141)."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        bench = start_cli(
            "bench", "--order", "sequential", "--runs", "2", "-N", "--export-json", "j.json", "true", "sleep 0.01",
            cwd=tmp_path, stdout=writer,
        )  # fmt: skip
    finally:
        os.close(writer)
    _, stderr = bench.communicate(timeout=SAFETY_NET)
    assert bench.returncode == 141, stderr
    assert len(json.loads((tmp_path / "j.json").read_text())["results"]) == 2


def test_a_failing_cleanup_after_the_first_command_leaves_its_block(tmp_path):
    done = run_cli(
        "bench", "--order", "sequential", "--runs", "2", "--cleanup", "false", "true", "sleep 0.01", cwd=tmp_path
    )
    assert done.returncode == 118, done.stderr
    assert "Benchmark 1: true\n" in done.stdout.decode() and b"Benchmark 2" not in done.stdout


def test_shown_output_comes_after_the_blank_line_that_ends_a_block(tmp_path):
    """hyperfine's spacing: each block but the last ends with a blank line, then the next
    command's header, its output, then the rest of its block."""
    done = run_cli(
        "bench", "--order", "sequential", "--runs", "1", "-N", "--show-output", "echo one", "echo two", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    shown = done.stdout.decode()
    assert shown.startswith("Benchmark 1: echo one\none\n  Time"), shown  # the header first, as hyperfine's
    assert "\n\nBenchmark 2: echo two\ntwo\n  Time" in shown, shown


@pytest.mark.parametrize(("stop", "returncode"), [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 107)])
def test_a_stop_gives_stdouts_export_what_the_export_files_hold(tmp_path, stop, returncode):
    """``--export-json -`` is one document, written at the end (hyperfine's stdout target): a stop
    amid the second command's runs left stdout with none, where the files keep the first command.
    Now stdout gets the document the files hold, and the same warning names what it leaves out."""
    stdout, stderr = _stopped_once_started(
        tmp_path, stop, returncode,
        "bench", "--style", "none", "--order", "sequential", "--runs", "3", "--export-json", "-",
        "--export-csv", "b.csv", "-n", "quick", "--command", '["true"]',
        "-n", "hangs", "--command", json.dumps(HANGS_SECOND_RUN),
    )  # fmt: skip
    printed = json.loads(stdout.decode())
    assert [(r["command"], len(r["times"])) for r in printed["results"]] == [("quick", 3)]
    assert (tmp_path / "b.csv").read_text().splitlines()[1].startswith("quick,")  # the file's, as before
    said = stderr.decode().splitlines()
    assert "warning: the exports leave out 'hangs' and its 1 timed run so far" in said[-2], said


def test_a_failing_command_gives_stdouts_export_the_finished_ones(tmp_path):
    """A run failing (118) ends the benchmark early as a stop does: stdout's export gets the
    commands done, as the files do, where it got no document."""
    done = run_cli(
        "bench", "--style", "none", "--order", "sequential", "--runs", "2", "-N", "--export-json", "-", "true", "false",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 118, done.stderr
    assert [r["command"] for r in json.loads(done.stdout.decode())["results"]] == ["true"]


def test_a_file_export_that_cannot_be_rewritten_gives_stdout_only_what_it_held(tmp_path):
    """The file's rewrite after the second command fails (its run made the path a directory): the
    benchmark fails (111), and stdout's export gets what the file held, the first command, not
    the second the file never held."""
    breaks = ["sh", "-c", "rm -f b.csv; mkdir -p b.csv"]
    done = run_cli(
        "bench", "--style", "none", "--order", "sequential", "--runs", "2", "-N", "--export-json", "-",
        "--export-csv", "b.csv", "-n", "one", "true", "-n", "two", "--command", json.dumps(breaks),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 111, done.stderr
    assert b"cannot write b.csv" in done.stderr
    assert [r["command"] for r in json.loads(done.stdout.decode())["results"]] == ["one"]


def test_a_fifo_export_gets_the_finished_commands_or_a_warning_without_a_reader(tmp_path):
    """A FIFO is a stream as stdout is: a failing run gives it, once, the commands done (its read
    end held open here before the benchmark, so nothing waits on a reader); with no reader the
    benchmark still ends by its failure, the export said unwritten in a warning before that line."""
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    argv = ("bench", "--style", "none", "--order", "sequential", "--runs", "2", "-N", "--export-json", fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        done = run_cli(*argv, "true", "false", cwd=tmp_path)
        with os.fdopen(reader, "rb", closefd=False) as pipe:  # the writer is gone: all of it, then EOF
            written = pipe.read()
    finally:
        os.close(reader)
    assert done.returncode == 118, done.stderr
    assert [r["command"] for r in json.loads(written.decode())["results"]] == ["true"]
    unread = run_cli(*argv, "true", "false", cwd=tmp_path)
    assert unread.returncode == 118, unread.stderr
    said = unread.stderr.decode().splitlines()
    assert said[-2].startswith(f"processkit-cli: warning: cannot write {fifo}:"), said
    assert "no process has open for reading" in said[-2] and "'false' exited with 1" in said[-1], said


@pytest.mark.parametrize(
    ("given", "returncode"),
    [
        (("--cpus", "99", "-N", "--export-json", "-", "true"), 111),  # refused before the calibration
        (("--shell", "no-such-shell/sh", "--export-json", "-", "true"), 118),  # the calibration fails
        (("-N", "--export-markdown", "-", "no-such-command-here"), 118),  # the first run cannot start
    ],
)
def test_a_benchmark_ending_before_any_command_is_done_prints_no_export(tmp_path, given, returncode):
    """stdout's export printed an empty document (``{"results": []}``, a header-only table) for a
    benchmark that failed before any command was done, where hyperfine prints none: a reader of
    the JSON took it for a benchmark that measured nothing. Only the failure's line is said."""
    done = run_cli("bench", "--style", "none", "--runs", "2", *given, cwd=tmp_path)
    assert done.returncode == returncode, done.stderr
    assert done.stdout == b"", done.stdout
    assert len(done.stderr.decode().splitlines()) == 1, done.stderr


def test_a_stop_amid_the_first_commands_runs_prints_no_export(tmp_path):
    """The same for a stop before any command is done: the warning names what is left out."""
    stdout, stderr = _stopped_once_started(
        tmp_path, signal.SIGTERM, 107,
        "bench", "--style", "none", "--runs", "3", "--export-json", "-",
        "-n", "hangs", "--command", json.dumps(HANGS_SECOND_RUN),
    )  # fmt: skip
    assert stdout == b"", stdout
    assert "warning: the exports leave out 'hangs' and its 1 timed run so far" in stderr.decode(), stderr


def _stopped_once_started(tmp_path, stop, returncode, *argv) -> tuple[bytes, bytes]:
    """``argv`` run in ``tmp_path`` and sent ``stop`` once a run made ``started``; its outputs."""
    bench = start_cli(*argv, cwd=tmp_path)
    try:
        wait_for_file(tmp_path / "started")
        bench.send_signal(stop)
        stdout, stderr = bench.communicate(timeout=SAFETY_NET)
    finally:
        bench.kill()
        bench.wait()
    assert bench.returncode == returncode, stderr
    return stdout, stderr
