"""A child that exits while processes of its tree still run (a background job, a daemon it
started: here holding none of the run's pipes, whose end of file then comes with the exit): the
teardown kills them at once (docs/run.md §3), so what they would have written next is in no echo
or capture file. Only ``cleanup_started``'s ``members_before`` said so; in human mode the runner
now says it on stderr too."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import SAFETY_NET, SHORT_EXIT_DRAIN, run_cli
from streams import check_stream, stderr_lines

WORDS = "processkit-cli: warning: the child exited with {n} still running when the teardown began, which ends {them} at once"


@pytest.mark.parametrize(
    ("jobs", "n", "them"), [(1, "1 process of its tree", "it"), (2, "2 processes of its tree", "them")]
)
def test_processes_the_childs_exit_left_to_the_teardown_are_said(tmp_path, jobs, n, them):
    script = "sleep 600 >/dev/null 2>&1 & " * jobs + "echo started"
    proc = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--", "sh", "-c", script)
    assert (proc.returncode, proc.stdout) == (0, b"started\n")
    (started,) = [e for e in check_stream(tmp_path / "run.jsonl", 0) if e["event"] == "cleanup_started"]
    assert started["members_before"] == jobs
    (line,) = stderr_lines(proc)
    assert line.startswith(WORDS.format(n=n, them=them)), line


def test_a_process_left_holding_the_pipe_is_said_with_the_exits_wait(tmp_path):
    """The leftover holds the child's stdout: the run waits for the pipe (the bound shortened
    here), then the teardown ends it, and the warning says the run ends at the pipes' close or
    the bound after the exit, not at the child's exit."""
    proc = run_cli(
        "run", "--jsonl", tmp_path / "run.jsonl", "--", "sh", "-c", "sleep 600 & echo started", patched=SHORT_EXIT_DRAIN
    )
    assert (proc.returncode, proc.stdout) == (0, b"started\n"), proc.stderr
    (line,) = stderr_lines(proc)
    bound = float(SHORT_EXIT_DRAIN[2])
    assert line == WORDS.format(n="1 process of its tree", them="it") + (
        f" (a run ends when its child has exited and its output pipes are closed, or {bound:g}s after the exit;"
        " what it would have written next is lost)"
    )


@pytest.mark.parametrize(("flag", "out"), [("--pty", b"started\r\n"), ("--inherit-stdio", b"started\n")])
def test_a_run_with_no_pipe_says_the_childs_exit_ended_it(tmp_path, flag, out):
    """Under --pty or --inherit-stdio no pipe is read, so the child's exit ends the run at once
    (docs/run.md §3): the warning said the run waits for the output pipes' close or 5 s. The
    leftover ignores SIGHUP, which the terminal's hangup would otherwise send it."""
    script = "trap '' HUP; sleep 600 >/dev/null 2>&1 & echo started"
    proc = run_cli("run", "--jsonl", tmp_path / "run.jsonl", flag, "--", "sh", "-c", script, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, out), proc.stderr
    (line,) = stderr_lines(proc)
    assert line == WORDS.format(n="1 process of its tree", them="it") + (
        f" (under {flag} a run ends when its child exits; what it would have written next is lost)"
    )


@pytest.mark.parametrize("flags", [("--error-format", "json"), ()])
def test_nothing_is_said_in_json_mode_nor_when_nothing_was_left(tmp_path, flags):
    script = "sleep 600 >/dev/null 2>&1 & echo started" if flags else "echo started"
    proc = run_cli(*flags, "run", "--jsonl", tmp_path / "run.jsonl", "--", "sh", "-c", script)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"started\n", b"")


# The CLI in a process of its own, counting the events its stream encodes (``emitter.encode``).
COUNTING = """
import sys
import processkit.events.emitter as emitter

made = []
encode = emitter.encode
emitter.encode = lambda record: made.append(record["event"]) or encode(record)
from processkit.cli.main import main

code = main()
sys.stderr.write(f"encoded {made}\\n")
sys.exit(code)
"""


def test_a_stream_to_dev_null_is_still_dropped_unmade():
    """The warning's count is the batch's leak (``Outcome.left_behind``), not an event kept from
    the stream: ``run --jsonl /dev/null`` builds and writes no event, and still warns."""
    argv = [
        "processkit-cli",
        "run",
        "--jsonl",
        "/dev/null",
        "--",
        "sh",
        "-c",
        "sleep 600 >/dev/null 2>&1 & echo started",
    ]
    proc = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.argv = {argv!r}\n" + COUNTING],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=SAFETY_NET,
    )
    assert (proc.returncode, proc.stdout) == (0, b"started\n"), proc.stderr
    warning, made = stderr_lines(proc)
    assert warning.startswith(WORDS.format(n="1 process of its tree", them="it")), warning
    assert made == "encoded []", made
