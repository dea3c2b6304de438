"""A failing run whose output nothing kept says so (``RunError``, and a timeout's ``TimeoutExpired``).

With the defaults (``echo=False``, nothing captured) the child's output is read by the runner
and dropped, where ``subprocess.run``'s child writes to the caller's streams: a ``check=True``
failure that said only the code left no trace of why. Its text now says which stream was
discarded and how to keep it, with keywords the call as written takes; a stream that went
anywhere (echoed, piped, captured, a file the caller gave, DEVNULL the caller asked for) gets no
clause, and ``stderr`` stays subprocess's (None when not captured)."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys

import pytest

import processkit
from processkit.events.types import RunStarted

CAUSE = "the cause of the failure"
FAILING = [sys.executable, "-c", f"import sys; sys.stderr.write({CAUSE + chr(10)!r}); sys.exit(3)"]
HANGING = [sys.executable, "-c", "import sys,time;sys.stderr.write('ERR\\n');sys.stderr.flush();time.sleep(30)"]
BOTH = "its output was discarded (echo=False and nothing captured): pass capture_output=True, echo=True or capture_dir="
STDERR = "its stderr was discarded (echo=False and not captured): pass stderr=PIPE or stderr=STDOUT, echo=True or"
# start()'s PIPE is a pipe nobody reads unless the caller does: never advised alone.
LIVE = "its output was discarded (echo=False and nothing captured): pass echo=True or capture_dir= to keep it (or"


def _raised(call, kind: type[BaseException] = processkit.RunError, code: int | None = 3):
    with pytest.raises(kind) as caught:
        call()
    if kind is processkit.RunError:
        assert caught.value.returncode == code
    return caught.value


def _said(error, clause: str = BOTH) -> None:
    assert clause in str(error), str(error)
    assert clause in str(pickle.loads(pickle.dumps(error)))  # as it travels back from an executor's worker
    assert error.result.output_discarded in str(error)
    # subprocess's meaning: not captured (a runner's failure, as a kill's, is in the text and its diagnostics)
    assert error.output is None and error.stderr is None


def _unsaid(error) -> None:
    assert "discarded" not in str(error) and error.result.output_discarded == "", str(error)


def test_a_failure_whose_output_went_nowhere_says_so():
    _said(_raised(lambda: processkit.run(FAILING, check=True)))
    _said(_raised(processkit.run(FAILING).check_returncode))
    _said(_raised(lambda: processkit.run(FAILING, check=True, input=b"ignored")))  # input= keeps nothing


def test_an_awaited_run_says_so():
    _said(_raised(lambda: asyncio.run(processkit.run_async(FAILING, check=True))))


@pytest.mark.parametrize("how", ["timeout", "idle_timeout", "run_async", "check"])
def test_a_timed_out_run_says_so_too(how):
    """The timeout's TimeoutExpired, as subprocess's (and still one), says it as RunError does."""
    options = {"idle_timeout": 0.5} if how == "idle_timeout" else {"timeout": 0.5}
    if how == "run_async":
        call = lambda: asyncio.run(processkit.run_async(HANGING, **options))  # noqa: E731
    else:
        call = lambda: processkit.run(HANGING, check=how == "check", **options)  # noqa: E731
    error = _raised(call, subprocess.TimeoutExpired)
    _said(error)
    assert error.timeout == 0.5 and pickle.loads(pickle.dumps(error)).timeout == 0.5
    assert str(error).startswith(f"{subprocess.TimeoutExpired(HANGING, 0.5)}; its output was discarded")


def test_a_timed_out_run_whose_output_was_captured_gets_no_clause():
    error = _raised(lambda: processkit.run(HANGING, timeout=0.5, capture_output=True), subprocess.TimeoutExpired)
    _unsaid(error)
    assert str(error) == str(subprocess.TimeoutExpired(HANGING, 0.5))


@pytest.mark.parametrize("where", ["pipe", "file"])
def test_stdout_kept_and_stderr_not_says_stderr_was_discarded(where, tmp_path):
    """subprocess would have shown that stderr on the terminal: it is the stream named."""
    with open(tmp_path / "stdout.txt", "wb") as file:
        stdout = subprocess.PIPE if where == "pipe" else file
        error = _raised(lambda: processkit.run(FAILING, check=True, stdout=stdout))
    assert STDERR in str(error) and error.result.output_discarded.startswith("its stderr was discarded")
    assert error.stderr is None


def test_stderr_kept_and_stdout_not_names_stdout():
    error = _raised(lambda: processkit.run(FAILING, check=True, stderr=subprocess.PIPE))
    assert "its stdout was discarded (echo=False and not captured): pass stdout=PIPE, echo=True" in str(error)
    assert CAUSE in error.stderr.decode()


def test_devnull_the_caller_asked_for_is_no_discarding_of_its_own():
    """As subprocess, which discards it too; STDOUT is not advised into a stdout sent to DEVNULL."""
    both = _raised(lambda: processkit.run(FAILING, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    _unsaid(both)
    error = _raised(lambda: processkit.run(FAILING, check=True, stdout=subprocess.DEVNULL))
    assert "its stderr was discarded (echo=False and not captured): pass stderr=PIPE, echo=True" in str(error)
    assert "STDOUT" not in str(error)


def test_stderr_into_a_discarded_stdout_advises_what_the_call_takes():
    """``capture_output`` with ``stderr=STDOUT`` is refused: stdout=PIPE is what keeps both."""
    error = _raised(lambda: processkit.run(FAILING, check=True, stderr=subprocess.STDOUT))
    _said(error, "its output was discarded (echo=False and nothing captured): pass stdout=PIPE, echo=True")
    assert "capture_output" not in str(error)
    kept = _raised(lambda: processkit.run(FAILING, check=True, stderr=subprocess.STDOUT, stdout=subprocess.PIPE))
    _unsaid(kept)
    assert CAUSE in kept.output.decode()


def test_a_pty_run_says_its_one_terminal_was_discarded():
    _said(_raised(lambda: processkit.run(FAILING, check=True, pty=True)))
    _unsaid(_raised(lambda: processkit.run(FAILING, check=True, pty=True, capture_output=True)))


def test_a_started_run_is_not_advised_a_pipe_nobody_reads():
    error = _raised(lambda: processkit.start(FAILING, check=True).wait())
    _said(error, LIVE + " stdout=PIPE and stderr=PIPE read with communicate())")
    assert "capture_output" not in str(error)
    piped = _raised(lambda: processkit.start(FAILING, check=True, stdout=subprocess.PIPE).communicate())
    assert "its stderr was discarded" in str(piped) and "read with communicate()" in str(piped)
    watched = _raised(lambda: processkit.start(FAILING, check=True, idle_timeout=30).wait())
    assert str(watched).endswith("pass echo=True or capture_dir= to keep it")  # idle_timeout refuses its PIPE


def test_a_started_pty_run_is_not_advised_the_pipes_it_refuses():
    """``start(pty=True)`` refuses stdout=PIPE (one terminal): its error names only what it takes."""
    error = _raised(lambda: processkit.start(FAILING, check=True, pty=True).wait())
    assert str(error).endswith("pass echo=True or capture_dir= to keep it")
    assert "PIPE" not in str(error)


def test_a_killed_run_says_so():
    with processkit.start(HANGING, check=True) as handle:
        for event in handle.events():
            if isinstance(event, RunStarted):
                break
        handle.kill()
        _said(_raised(handle.wait, code=-9), LIVE)


def test_a_setup_failure_gets_no_clause(tmp_path):
    """No child started: nothing it wrote was lost."""
    _unsaid(_raised(lambda: processkit.run(FAILING, check=True, jsonl=tmp_path / "missing" / "run.jsonl"), code=111))


@pytest.mark.parametrize("kept", ["echo", "capture_output", "stderr_file", "capture_dir", "inherit_stdio"])
def test_output_that_went_somewhere_gets_no_clause(kept, tmp_path, capfd):
    options: dict = {
        "echo": {"echo": True},
        "capture_output": {"capture_output": True},
        "capture_dir": {"capture_dir": str(tmp_path / "capture")},
        "inherit_stdio": {"inherit_stdio": True},
    }.get(kept, {})
    with open(tmp_path / "stderr.txt", "wb") as file:
        if kept == "stderr_file":
            options.update(stderr=file, stdout=subprocess.DEVNULL)
        error = _raised(lambda: processkit.run(FAILING, check=True, **options))
    _unsaid(error)
    where = {
        "echo": lambda: capfd.readouterr().err,
        "inherit_stdio": lambda: capfd.readouterr().err,
        "capture_output": lambda: error.stderr.decode(),
        "stderr_file": lambda: (tmp_path / "stderr.txt").read_text(),
        "capture_dir": lambda: open(error.result.stderr_capture.path).read(),
    }
    assert CAUSE in where[kept]()  # and there the cause is


def test_a_result_pickled_before_the_field_reads_as_one_without_it():
    """A RunResult pickled by a build without ``output_discarded`` (the starting tree's) loads
    with the default: nothing said."""
    result = processkit.run(FAILING)
    assert result.output_discarded
    object.__delattr__(result, "output_discarded")  # the state such a build pickles
    old = pickle.loads(pickle.dumps(result))
    assert old.output_discarded == ""
    _unsaid(_raised(old.check_returncode))
