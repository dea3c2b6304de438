"""processkit.run with subprocess.run's stream keywords (issue 23, item 13): capture_output,
stdout/stderr=PIPE or DEVNULL, text, input; bounded by the capture cap; what is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

import processkit

PY = sys.executable
BOTH = "import sys; data = sys.stdin.buffer.read(); sys.stdout.buffer.write(data); sys.stderr.write('err\\r\\nline')"


@pytest.fixture(autouse=True)
def own_tempdir(tmp_path, monkeypatch):
    """The scratch files of these calls land in the test's own directory, to be counted."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    yield scratch
    assert os.listdir(scratch) == [], "every scratch file of a finished call is removed"


def test_capture_output_fills_stdout_and_stderr_as_bytes():
    result = processkit.run([PY, "-c", BOTH], input=b"in\x00put", capture_output=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"in\x00put", b"err\r\nline")
    assert result.stdout_capture is not None and result.stdout_capture.bytes_seen == 6


def test_text_decodes_with_universal_newlines_and_input_is_a_str():
    result = processkit.run(
        [PY, "-c", BOTH], input="héllo\n", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8"
    )
    assert (result.stdout, result.stderr) == ("héllo\n", "err\nline")


def test_only_the_streams_asked_for_are_kept():
    result = processkit.run([PY, "-c", BOTH], input=b"x", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert (result.stdout, result.stderr) == (None, b"err\r\nline")
    assert processkit.run([PY, "-c", BOTH], input=b"x").stdout is None


def test_large_input_and_output_do_not_deadlock():
    data = os.urandom(8 << 20)  # far beyond any pipe buffer, both ways
    result = processkit.run([PY, "-c", BOTH], input=data, capture_output=True, capture_max_bytes="16m", timeout="2m")
    assert result.returncode == 0 and result.stdout == data


def test_output_is_bounded_by_the_capture_cap_and_says_so():
    script = "import sys; sys.stdout.write('é' * 5000)"
    with pytest.warns(
        processkit.CaptureTruncated, match="stdout cut by capture_max_bytes: 5903 of 10000 bytes lost"
    ) as said:
        result = processkit.run(
            [PY, "-c", script], capture_output=True, capture_max_bytes=4097, text=True, encoding="utf-8"
        )
    assert [w.category for w in said if issubclass(w.category, processkit.CaptureTruncated)] == [
        processkit.CaptureTruncated
    ], "the cap's, not a failed write's"
    assert result.stdout == "é" * 2048, "cut at the cap, the split character left out"
    assert result.stdout_capture.truncated and result.stdout_capture.bytes_seen == 10000


def test_a_named_capture_dir_is_read_and_kept(tmp_path):
    result = processkit.run([PY, "-c", BOTH], input=b"kept", capture_output=True, capture_dir=tmp_path / "cap")
    assert result.stdout == b"kept" == (tmp_path / "cap" / "stdout.log").read_bytes()


def test_check_raises_with_the_output_as_subprocess_does():
    with pytest.raises(subprocess.CalledProcessError) as raised:
        processkit.run(
            [PY, "-c", "import sys; print('out'); sys.exit('bad')"], capture_output=True, text=True, check=True
        )
    assert (raised.value.returncode, raised.value.stdout, raised.value.stderr) == (1, "out\n", "bad\n")


def test_start_gives_the_output_to_communicate():
    with processkit.start([PY, "-c", BOTH], input=b"started", capture_output=True) as handle:
        assert handle.communicate(timeout=60) == (b"started", b"err\r\nline")
    assert handle.returncode == 0


@pytest.mark.parametrize(
    "options, error, text",
    [
        ({"stdout": subprocess.STDOUT}, ValueError, "only for stderr"),
        ({"stdout": -5}, ValueError, "no descriptor"),
        ({"stdout": "out.txt"}, TypeError, "a file object or a descriptor"),
        ({"stdin": True}, TypeError, "a file object or a descriptor"),
        ({"stdout": 1, "stderr": 2, "echo": True}, ValueError, "both go elsewhere"),
        ({"stderr": subprocess.STDOUT, "pty": True}, ValueError, "pty=True"),
        ({"stdout": 1, "idle_timeout": 5}, ValueError, "idle_timeout watches"),
        ({"capture_output": True, "stdout": subprocess.PIPE}, ValueError, "capture_output"),
        ({"capture_output": "yes"}, TypeError, "True or False"),
        ({"input": "text"}, TypeError, "text=True"),
        ({"input": b"x", "text": True}, TypeError, "str when text=True"),
        ({"input": 3}, TypeError, "bytes-like object or a str"),
        ({"input": b"x", "stdin_file": "/dev/null"}, ValueError, "input cannot be used"),
        ({"input": b"x", "stdin": subprocess.DEVNULL}, ValueError, "may not both"),
        ({"capture_output": True, "inherit_stdio": True}, ValueError, "inherit_stdio"),
    ],
)
def test_what_is_not_supported_is_refused_before_anything_starts(options, error, text):
    with pytest.raises(error, match=text):
        processkit.run(["true"], **options)
