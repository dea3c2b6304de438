"""processkit.run: the subprocess.run shape, every flag as a keyword, errors before anything starts,
setup failures as 1xx results, pickling, asyncio."""

from __future__ import annotations

import asyncio
import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import processkit
from processkit.cli.run import build_parser
from processkit.events.types import RootExited, RunnerExit, RunStarted, Timeout
from conftest import SAFETY_NET

PY = sys.executable


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_run_returns_child_code_and_capture_info(tmp_path):
    script = "import sys; sys.stdout.write('out' * 1000); sys.stderr.write('err'); sys.exit(3)"
    result = processkit.run([PY, "-c", script], capture_dir=tmp_path / "cap", timeout="1m", labels={"suite": "api"})
    assert result.args == [PY, "-c", script]
    assert (result.returncode, result.source, result.child_code) == (3, "child_exit", 3)
    out, err = result.stdout_capture, result.stderr_capture
    assert (out.bytes_seen, out.bytes_written, out.truncated, out.write_error) == (3000, 3000, False, False)
    assert out.sha256 == digest(out.path) == hashlib.sha256(b"out" * 1000).hexdigest()
    assert (err.bytes_seen, err.sha256) == (3, digest(err.path))
    assert isinstance(result.events[0], RunStarted) and result.events[0].labels == {"suite": "api"}
    assert result.events[0].run_id == result.run_id
    assert isinstance(result.events[-1], RunnerExit) and result.events[-1].code == 3
    assert isinstance(result.ending, RootExited)
    assert result.resources is not None and result.resources.event == "resource_summary"
    assert result.jsonl is None  # a scratch stream is not kept
    with pytest.raises(subprocess.CalledProcessError) as caught:
        result.check_returncode()
    assert caught.value.returncode == 3 and caught.value.result is result


def test_zero_exit_and_check_true_passes(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    result = processkit.run(["true"], check=True, jsonl=jsonl, run_id="api-zero")
    result.check_returncode()
    assert (result.returncode, result.run_id, result.jsonl) == (0, "api-zero", str(jsonl))
    assert jsonl.read_text().splitlines()[-1].startswith('{"schema_version":1')


def test_check_true_raises_a_called_process_error():
    with pytest.raises(processkit.RunError) as caught:
        processkit.run(["sh", "-c", "exit 7"], check=True)
    assert isinstance(caught.value, subprocess.CalledProcessError)
    assert caught.value.returncode == 7 and caught.value.cmd == ["sh", "-c", "exit 7"]


def test_durations_and_sizes_take_numbers(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired) as expired:
        processkit.run(["sleep", "30"], timeout=0.2, grace=0)
    result = expired.value.result
    assert (result.returncode, result.source, result.child_code) == (106, "timeout", None)
    assert isinstance(result.ending, Timeout) and result.ending.timeout_ms == 200 and result.ending.grace_ms == 0
    with pytest.warns(processkit.CaptureTruncated, match="holds 10 of its 16 bytes"):
        capped = processkit.run(["sh", "-c", "printf 0123456789abcdef"], capture_dir=tmp_path, capture_max_bytes=10)
    assert (capped.stdout_capture.bytes_seen, capped.stdout_capture.bytes_written) == (16, 10)
    assert capped.stdout_capture.truncated and capped.stdout_capture.sha256 == digest(tmp_path / "stdout.log")


def test_env_and_cwd_keywords(tmp_path):
    result = processkit.run(
        ["sh", "-c", 'printf "%s:%s" "$GREETING" "$(pwd)"'],
        env={"GREETING": "hello"},
        env_remove=["HOME"],
        cwd=tmp_path,
        capture_dir=tmp_path / "cap",
    )
    assert result.returncode == 0
    assert (tmp_path / "cap" / "stdout.log").read_text() == f"hello:{tmp_path}"


def test_every_run_flag_has_a_keyword():
    """Read from RUN_OPTIONS, checked here against the parser argparse builds; the global
    --error-format is the API's own business (it reads the runner's failures as JSON)."""
    flags = {a.dest for a in build_parser()._actions if a.option_strings and a.dest != "help"}
    keywords = set(processkit.keywords())
    assert flags - {"no_echo", "detach", "label", "error_format", "usage_file"} == keywords - {"labels", "env_add"}
    assert "labels" in keywords


@pytest.mark.parametrize(
    "call, error, text",
    [
        (lambda: processkit.run(3), TypeError, "list of strings"),
        (lambda: processkit.run(["true", 3]), TypeError, "args item"),
        (lambda: processkit.run([]), ValueError, "program"),
        (lambda: processkit.run(["true"], shell="yes"), TypeError, "shell must be True or False"),
        (lambda: processkit.run(3, shell=True), TypeError, "a string with shell=True"),
        (lambda: processkit.run(["true"], no_echo=True), TypeError, "echo="),
        (lambda: processkit.run(["true"], detach=True), TypeError, "start()"),
        (lambda: processkit.run(["true"], timeout="10 parsecs"), ValueError, "for 'timeout='"),
        (lambda: processkit.run(["true"], timeout=-1), ValueError, "timeout"),
        (lambda: processkit.run(["true"], timeout=0), ValueError, "greater than zero"),
        (lambda: processkit.run(["true"], timeout=True), TypeError, "timeout"),
        (
            lambda: processkit.run(["true"], capture_max_bytes="12x", capture_dir="d"),
            ValueError,
            "for 'capture_max_bytes='",
        ),
        (
            lambda: processkit.run(["true"], capture_max_bytes=5),
            ValueError,
            "the argument 'capture_max_bytes=' requires 'capture_dir='",
        ),
        (
            lambda: processkit.run(["true"], capture_keep="tail"),
            ValueError,
            "the argument 'capture_keep=' requires 'capture_dir='",
        ),
        (lambda: processkit.run(["true"], labels={"bad key": "v"}), ValueError, "label key"),
        (lambda: processkit.run(["true"], labels="a=b"), TypeError, "labels"),
        (lambda: processkit.run(["true"], inherit_stdio=True, capture_dir="x"), ValueError, "cannot be used with"),
        (lambda: processkit.run(["true"], inherit_stdin="yes"), TypeError, "True or False"),
        (lambda: processkit.run(["true"], echo=1), TypeError, "echo"),
        (lambda: processkit.start(["true"], timeout="1y"), ValueError, "for 'timeout='"),
        (lambda: processkit.run(["true", "\ud800"]), ValueError, "args item 1 holds a lone surrogate ('\\ud800')"),
        (lambda: processkit.run(["a\0b"]), ValueError, "args item 0 holds a NUL character (at offset 1)"),
        (lambda: processkit.run([b"true", b"x\0"]), ValueError, "args item 1 holds a NUL character (at offset 1)"),
        (lambda: processkit.run(["true"], env={"K": "a\0"}), ValueError, "env holds a NUL character"),
        (lambda: processkit.run(["true"], env={"K": "\udfff"}), ValueError, "env holds a lone surrogate"),
        (
            lambda: processkit.run(["true"], env={"A=B": "c"}),
            ValueError,
            "invalid value for 'env=': an environment key may not contain control characters or '='",
        ),
        (
            lambda: processkit.run(["true"], env={"A": 1}),
            TypeError,
            "the value of 'A' in env must be a string, not int",
        ),
        (lambda: processkit.run(["true"], env={1: "x"}), TypeError, "each env key must be a string, not int"),
        (
            lambda: processkit.run(["true"], labels={"k": None}),
            TypeError,
            "the value of 'k' in labels must be a string",
        ),
        (lambda: processkit.run(["true"], timeout=[1]), TypeError, "timeout must be a number of seconds or a duration"),
        (lambda: processkit.run(["true"], run_id=7), TypeError, "run_id must be a string, not int"),
    ],
)
def test_bad_input_raises_before_anything_starts(call, error, text, tmp_path, isolated_registry, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the API's scratch directory would land here
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(error, match=None) as caught:
        call()
    assert text in str(caught.value)
    assert list(tmp_path.iterdir()) == [] and list(isolated_registry.iterdir()) == []


def test_setup_failure_is_a_result_or_raises_under_check(tmp_path):
    jsonl = tmp_path / "missing-dir" / "run.jsonl"
    result = processkit.run(["true"], jsonl=jsonl)
    assert (result.returncode, result.source, result.child_code) == (111, "setup", None)
    assert result.message and "jsonl" in result.message.lower()
    with pytest.raises(processkit.RunError) as caught:
        processkit.run(["true"], jsonl=jsonl, check=True)
    assert caught.value.returncode == 111 and "jsonl" in str(caught.value).lower()


@pytest.mark.parametrize(
    "args, cwd",
    [
        (["/nonexistent/program"], None),
        (["no-such-program-anywhere"], None),
        (["/etc/hostname"], None),  # not executable: PermissionError
        (["true"], "/nonexistent/dir"),
        (["true"], "/etc/hostname"),  # NotADirectoryError
        (["true"], ""),  # names no directory: chdir("") fails; before, it ran in the caller's
    ],
)
def test_what_cannot_start_raises_as_subprocess_does(args, cwd):
    with pytest.raises(OSError) as expected:
        subprocess.run(args, cwd=cwd)
    with pytest.raises(OSError) as raised:
        processkit.run(args, cwd=cwd)
    error, wanted = raised.value, expected.value
    assert (type(error), error.errno, error.strerror, error.filename) == (
        type(wanted),
        wanted.errno,
        wanted.strerror,
        wanted.filename,
    )
    assert error.result.returncode == 101 and error.result.source == "spawn_error"
    assert [e.event for e in error.result.events] == ["spawn_failed", "runner_exit"]
    assert "could not start" in error.result.message or "cannot use cwd=" in error.result.message


@pytest.mark.parametrize("keyword, value", [("capture_dir", ""), ("stdin_file", ""), ("jsonl", ""), ("env_file", [""])])
def test_an_empty_path_is_a_bad_value_and_nothing_runs(tmp_path, monkeypatch, keyword, value):
    """A ValueError, as any keyword's bad value (``cwd=""`` alone is subprocess's FileNotFoundError):
    before, ``capture_dir=""`` wrote stdout.log and stderr.log into the caller's directory and
    the others were a 111 result."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=f"^invalid value '' for '{keyword}=': expected a path"):
        processkit.run(["touch", "ran"], **{keyword: value})
    assert os.listdir(tmp_path) == []


def test_a_death_by_signal_is_minus_n_as_subprocess_gives_it():
    result = processkit.run(["sh", "-c", "kill -9 $$"])
    assert (result.returncode, result.exit_code, result.source) == (-9, 137, "child_exit")
    assert subprocess.run(["sh", "-c", "kill -9 $$"]).returncode == -9
    assert processkit.run(["sh", "-c", "exit 137"]).returncode == 137  # an exit status stays itself


def test_a_timeout_raises_timeout_expired_with_the_output_so_far():
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        processkit.run(["sh", "-c", "echo started; sleep 30"], timeout=0.5, capture_output=True, text=True)
    assert raised.value.timeout == 0.5 and raised.value.cmd == ["sh", "-c", "echo started; sleep 30"]
    assert raised.value.output == raised.value.stdout == "started\n" and raised.value.stderr == ""
    assert raised.value.result.returncode == 106


def test_repr_is_one_line():
    result = processkit.run(["sh", "-c", "printf abc"], capture_output=True)
    text = repr(result)
    assert "\n" not in text and len(text) < 300, text
    assert "returncode=0" in text and "source='child_exit'" in text and "stdout=3 bytes captured" in text
    assert "duration=" in text and "RunStarted" not in text


def test_echo_false_keeps_the_callers_streams_clean_and_echo_true_forwards(capfd, tmp_path):
    processkit.run(["sh", "-c", "echo quiet; echo quiet-err >&2"])
    assert capfd.readouterr() == ("", "")
    script = "import processkit; processkit.run(['sh', '-c', 'echo loud; echo loud-err >&2'], echo=True)"
    shown = subprocess.run([PY, "-c", script], capture_output=True, timeout=SAFETY_NET)
    assert (shown.stdout, shown.stderr) == (b"loud\n", b"loud-err\n")


def test_result_and_error_pickle_round_trip(tmp_path):
    result = processkit.run(["sh", "-c", "echo x; exit 2"], capture_dir=tmp_path)
    again = pickle.loads(pickle.dumps(result))
    assert again == result and again.events == result.events and again.stdout_capture == result.stdout_capture
    error = pickle.loads(pickle.dumps(processkit.RunError(result)))
    assert isinstance(error, subprocess.CalledProcessError) and error.returncode == 2 and error.result == result


def test_the_host_interpreter_gets_no_handlers_and_lends_no_descriptors(tmp_path):
    """The runner is a separate process: this interpreter's signal dispositions are untouched,
    and a descriptor it holds open is not inherited by the child."""
    import signal

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)}
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        result = processkit.run(["sh", "-c", f"ls /proc/self/fd; [ -e /proc/self/fd/{write_end} ] && exit 9; exit 0"])
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result.returncode == 0
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_run_async_and_cancelling_its_task(isolated_registry):
    async def main():
        done = await processkit.run_async(["sh", "-c", "exit 4"])
        task = asyncio.ensure_future(processkit.run_async(["sleep", "30"], run_id="api-async-cancel"))
        while not processkit.runs():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return done

    result = asyncio.run(main())
    assert (result.returncode, result.source) == (4, "child_exit")
    assert processkit.runs() == []


def test_inherit_stdio_hands_the_callers_streams_to_the_child():
    script = "import processkit; r = processkit.run(['sh', '-c', 'echo direct; echo direct-err >&2'], inherit_stdio=True); print(r.returncode)"
    shown = subprocess.run([PY, "-c", script], capture_output=True, timeout=SAFETY_NET)
    assert (shown.stdout, shown.stderr) == (b"direct\n0\n", b"direct-err\n")


def test_concurrent_calls_from_threads(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(
                lambda i: processkit.run(["sh", "-c", f"printf {i}; exit {i}"], capture_dir=tmp_path / str(i)), range(6)
            )
        )
    assert [r.returncode for r in results] == list(range(6))
    assert len({r.run_id for r in results}) == 6
    assert all((tmp_path / str(i) / "stdout.log").read_text() == str(i) for i in range(6))
