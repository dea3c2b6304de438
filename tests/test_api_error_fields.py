"""What a failed run's exception carries, side by side with ``subprocess.run``'s for the same call.

``CalledProcessError.stderr`` held the runner's own lines (a ``LeftRunning`` warning, a kill's JSON
envelope) as a ``str`` whenever the child's stderr was not captured: bytes mode gave text, and the
runner's words read as the child's (docs/api.md says it stays subprocess's None). And a cap's cut
was said in the error's text only for a run that exited 0: a failed or timed-out run's error, the
line a CI log keeps, was silent about it once its ``CaptureTruncated`` warning was filtered (or
shown once, Python's default). Through the real service, real children."""

from __future__ import annotations

import subprocess
import warnings

import pytest

import processkit

# Exits 3 with a process of its tree still running (its daemon holds no pipe): the runner says so.
LEAVES = ["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo out; echo err >&2; exit 3"]
# The same call for subprocess, which would leave its daemon running: the fields do not depend on it.
STAYS = ["sh", "-c", "echo out; echo err >&2; exit 3"]
CUT = ["sh", "-c", "head -c 5000 /dev/zero; exit 2"]
LOST = "stdout cut by capture_max_bytes: 4000 of 5000 bytes lost"


def _failed(call, kind=subprocess.CalledProcessError):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the error alone must say what it says
        with pytest.raises(kind) as raised:
            call()
    return raised.value


@pytest.mark.parametrize("streams", [{}, {"stdout": subprocess.PIPE}])
def test_stderr_not_captured_is_none_as_subprocess_gives_it(streams, tmp_path):
    ran = _failed(lambda: subprocess.run(STAYS, check=True, cwd=tmp_path, **streams))
    error = _failed(lambda: processkit.run(LEAVES, check=True, cwd=tmp_path, **streams))
    assert (error.returncode, error.stderr, error.output) == (ran.returncode, ran.stderr, ran.output)
    assert "still running" in error.result.diagnostics  # the runner's line is kept where it belongs


def test_stderr_captured_is_the_childs_bytes(tmp_path):
    error = _failed(lambda: processkit.run(LEAVES, check=True, cwd=tmp_path, stderr=subprocess.PIPE))
    assert error.stderr == b"err\n"


def test_a_killed_handles_error_has_no_stderr_of_the_runners(tmp_path):
    handle = processkit.start(["sleep", "600"], check=True, cwd=tmp_path)
    handle.kill()
    error = _failed(handle.wait)
    assert (error.returncode, error.stderr) == (-9, None)
    assert "run killed by a control-plane command" in str(error)  # the runner's failure: in the text


def test_a_failed_runs_error_says_the_cut(tmp_path):
    error = _failed(lambda: processkit.run(CUT, capture_output=True, capture_max_bytes=1000, check=True, cwd=tmp_path))
    assert error.returncode == 2 and len(error.stdout) == 1000
    assert LOST in str(error), str(error)


def test_a_timeouts_error_says_the_cut(tmp_path):
    argv = ["sh", "-c", "head -c 5000 /dev/zero; exec sleep 600"]
    error = _failed(
        lambda: processkit.run(argv, capture_output=True, capture_max_bytes=1000, timeout=3, cwd=tmp_path),
        subprocess.TimeoutExpired,
    )
    assert len(error.stdout) == 1000
    assert str(error).startswith(f"Command '{argv!r}' timed out after 3 seconds; {LOST}"), str(error)


@pytest.mark.parametrize("text", [False, True])
def test_communicate_under_check_keeps_what_the_pipes_gave(text, tmp_path):
    """The way out a discarded output's error advises (``stdout=PIPE and stderr=PIPE read with
    communicate()``) lost both: the RunError held None and a second call raised it again."""
    argv = ["sh", "-c", "echo out; echo err >&2; exit 3"]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": text, "cwd": tmp_path}
    ran = _failed(lambda: subprocess.run(argv, check=True, **pipes))
    handle = processkit.start(argv, check=True, **pipes)
    for _ in range(2):  # each call, as the exchange is kept
        error = _failed(handle.communicate, processkit.RunError)
        assert (error.returncode, error.output, error.stdout, error.stderr) == (3, ran.output, ran.stdout, ran.stderr)
    assert processkit.start(["sh", "-c", "echo fine"], check=True, **pipes).communicate()[0] == (
        "fine\n" if text else b"fine\n"
    )


def test_communicate_under_check_with_undecodable_output_raises_as_subprocess_does(tmp_path):
    """Text mode with strict errors: the output is decoded before the check, so a failed run whose
    bytes do not decode raises ``UnicodeDecodeError``, as ``subprocess.run(check=True)`` does, with
    no ``RunError`` chained before it."""
    argv = ["sh", "-c", "printf '\\377'; exit 3"]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, "cwd": tmp_path}
    with pytest.raises(UnicodeDecodeError):
        subprocess.run(argv, check=True, **pipes)
    with pytest.raises(UnicodeDecodeError) as raised:
        processkit.start(argv, check=True, **pipes).communicate()
    assert raised.value.__context__ is None
