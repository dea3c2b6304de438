"""A capture file the caller's ``capture_dir=`` keeps, cut at ``capture_max_bytes`` or by a failed
write, is said as ``processkit-cli run`` says it on stderr: the API said a cut only for the
streams it returns (``capture_output``, ``PIPE``), so a run that kept its output in files lost
bytes, or every byte on a full disk, with no word (only ``stdout_capture``'s flags said it)."""

from __future__ import annotations

import os
import subprocess
import warnings

import pytest

import processkit

FIVE_THOUSAND = ["head", "-c", "5000", "/dev/zero"]


def _said(record) -> list[tuple[type, str]]:
    return [(w.category, str(w.message)) for w in record if issubclass(w.category, processkit.CaptureTruncated)]


def test_a_capture_file_cut_at_its_cap_is_said(tmp_path):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = processkit.run(FIVE_THOUSAND, capture_dir=str(tmp_path), capture_max_bytes=1000, check=True)
    assert result.returncode == 0 and result.stdout is None and result.stdout_capture.truncated
    assert _said(record) == [
        (
            processkit.CaptureTruncated,
            f"processkit.run('head', ...): stdout's capture was cut at capture_max_bytes: "
            f"{tmp_path}/stdout.log holds 1000 of its 5000 bytes",
        )
    ], "said once, naming the file; check=True still takes the child's 0, as the CLI's exit code does"
    assert [w.filename for w in record if w.category is processkit.CaptureTruncated] == [__file__], "the caller's line"


def test_a_capture_file_a_write_failed_is_said(tmp_path):
    (tmp_path / "stdout.log").symlink_to("/dev/full")  # a full disk
    with pytest.warns(processkit.CaptureWriteFailed, match=r"a write to stdout's capture failed: .* holds 0 of its 6"):
        result = processkit.run(["sh", "-c", "echo hello"], capture_dir=str(tmp_path))
    assert result.returncode == 0 and result.stdout_capture.write_error


def test_a_started_runs_capture_file_cut_at_its_cap_is_said(tmp_path):
    """Said as ``start``'s, at the caller's ``wait`` (it pointed into processkit/api/handle.py)."""
    handle = processkit.start(FIVE_THOUSAND, capture_dir=str(tmp_path), capture_max_bytes=1000)
    with pytest.warns(processkit.CaptureTruncated, match="holds 1000 of its 5000 bytes") as said:
        assert handle.wait(timeout=60) == 0
    [warned] = [w for w in said if issubclass(w.category, processkit.CaptureTruncated)]
    assert str(warned.message).startswith("processkit.start('head', ...): ")
    assert warned.filename == __file__, warned.filename


def test_a_stream_asked_back_is_said_once_and_a_file_that_fits_not_at_all(tmp_path):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        processkit.run(
            ["sh", "-c", "head -c 5000 /dev/zero; echo fits >&2"],
            stdout=subprocess.PIPE,
            capture_dir=str(tmp_path),
            capture_max_bytes=1000,
        )
    assert [text.split(": ", 1)[1] for _, text in _said(record)] == [
        "stdout cut by capture_max_bytes: 4000 of 5000 bytes lost"
    ]


def test_the_stream_whose_overflow_ended_the_run_is_left_to_its_code(tmp_path):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = processkit.run(
            ["sh", "-c", "head -c 5000 /dev/zero; exec sleep 60"],
            capture_dir=str(tmp_path),
            capture_max_bytes=1000,
            capture_overflow="cancel",
        )
    assert result.exit_code == 113
    assert _said(record) == [], "the 113 result says it, as the CLI's 113 line does"


def test_a_cut_raised_as_an_error_leaves_the_run_let_go_and_its_result_kept(tmp_path):
    """Under warnings as errors the cut raised in ``wait`` before the handle kept its result or let
    the run go: each ``wait`` raised it again, and the scratch stream and the connection's entry
    for the run stayed. Now the first ``wait`` raises it once, with all that done."""
    handle = processkit.start(FIVE_THOUSAND, capture_dir=str(tmp_path), capture_max_bytes=1000)
    scratch = handle.jsonl
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(processkit.CaptureTruncated, match="holds 1000 of its 5000 bytes"):
            handle.wait(timeout=60)
        assert not os.path.exists(scratch), "the scratch stream is let go"
        assert handle.wait(timeout=0) == 0, "the result is kept, its cut said once"
        assert handle.result().stdout_capture.truncated
