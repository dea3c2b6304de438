"""A failing run whose output nothing kept says so (``RunError``).

With the defaults (``echo=False``, nothing captured) the child's output is read by the runner
and dropped, where ``subprocess.run``'s child writes to the caller's streams: a ``check=True``
failure whose ``RunError`` said only the code left no trace of why. Its text now says the output
was discarded and how to keep it; a run whose output went anywhere (echoed, piped, captured, a
file the caller gave) does not get that clause, and ``stderr`` stays subprocess's (None when not
captured)."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys

import pytest

import processkit

CAUSE = "the cause of the failure"
FAILING = [sys.executable, "-c", f"import sys; sys.stderr.write({CAUSE + chr(10)!r}); sys.exit(3)"]
CLAUSE = "its output was discarded (echo=False and nothing captured): pass capture_output=True"


def _raised(call) -> processkit.RunError:
    with pytest.raises(processkit.RunError) as caught:
        call()
    assert caught.value.returncode == 3
    return caught.value


def _said_discarded(error: processkit.RunError) -> None:
    assert CLAUSE in str(error)
    assert error.stderr is None and error.output is None  # subprocess's meaning: not captured
    assert error.result.discarded


def test_a_failure_whose_output_went_nowhere_says_so():
    _said_discarded(_raised(lambda: processkit.run(FAILING, check=True)))


def test_check_returncode_of_a_result_says_so_too():
    result = processkit.run(FAILING)
    error = _raised(result.check_returncode)
    _said_discarded(error)
    _said_discarded(pickle.loads(pickle.dumps(error)))  # as it travels back from an executor's worker


def test_a_started_run_and_an_awaited_one_say_so():
    _said_discarded(_raised(lambda: processkit.start(FAILING, check=True).wait()))
    _said_discarded(_raised(lambda: asyncio.run(processkit.run_async(FAILING, check=True))))


def test_stderr_into_a_discarded_stdout_is_discarded_too():
    _said_discarded(_raised(lambda: processkit.run(FAILING, check=True, stderr=subprocess.STDOUT)))


def test_a_run_that_succeeded_is_not_marked():
    assert not processkit.run([sys.executable, "-c", "print('fine')"]).discarded


@pytest.mark.parametrize("kept", ["echo", "capture_output", "stderr_file", "capture_dir", "stdout_pipe"])
def test_output_that_went_somewhere_gets_no_clause(kept, tmp_path, capfd):
    options: dict = {
        "echo": {"echo": True},
        "capture_output": {"capture_output": True},
        "capture_dir": {"capture_dir": str(tmp_path / "capture")},
        "stdout_pipe": {"stdout": subprocess.PIPE},
    }.get(kept, {})
    with open(tmp_path / "stderr.txt", "wb") as file:
        if kept == "stderr_file":
            options["stderr"] = file
        error = _raised(lambda: processkit.run(FAILING, check=True, **options))
    assert "discarded" not in str(error) and not error.result.discarded
    where = {
        "echo": lambda: capfd.readouterr().err,
        "capture_output": lambda: error.stderr.decode(),
        "stderr_file": lambda: (tmp_path / "stderr.txt").read_text(),
        "capture_dir": lambda: open(error.result.stderr_capture.path).read(),
    }
    if kept in where:  # and there the cause is
        assert CAUSE in where[kept]()


def test_a_failed_batch_job_kept_its_output_and_gets_no_clause(tmp_path):
    """A batch captures every job under ``out``: its failure's cause is there to read."""
    with pytest.raises(processkit.BatchError) as caught:
        processkit.batch([{"id": "shard", "args": FAILING}], out=str(tmp_path / "out"), check=True)
    assert "discarded" not in str(caught.value)
    (line,) = caught.value.lines
    assert line["exit_code"] == 3
    with open(line["capture"]["stderr"]["path"]) as kept:
        assert CAUSE in kept.read()
