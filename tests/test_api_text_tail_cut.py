"""Text mode on a capture ``capture_keep`` cut at its start: a tail (or head-tail's second part)
that began inside a UTF-8 character raised UnicodeDecodeError out of ``processkit.run`` (the
result lost), where a head cut inside one leaves it out. Every cut now leaves a split character
out, and a byte that is the stream's own is still refused or replaced as ``errors`` says."""

from __future__ import annotations

import sys
import warnings

import pytest

import processkit

PY = sys.executable
TEXT = "é" * 1000 + "€" * 1000  # 2000 bytes, then 3000 bytes: every cap below splits a character


def run_text(cap: int, keep: str, **options):
    argv = [PY, "-c", f"import sys; sys.stdout.write({TEXT!r})"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", processkit.CaptureTruncated)  # the cut itself is said elsewhere
        return processkit.run(argv, capture_output=True, capture_max_bytes=cap, capture_keep=keep, **options)


@pytest.mark.parametrize("keep", ["tail", "head-tail"])
def test_a_cut_inside_a_character_leaves_it_out(keep):
    result = run_text(1003, keep, text=True)
    assert result.stdout_capture.bytes_written == 1003
    if keep == "tail":  # the last 1003 bytes: 2 bytes of a euro sign, then 334 whole ones
        assert result.stdout == "€" * 334
    else:  # the first 501 bytes (250 é and half of one), then the last 502 (1 byte of a €, 167 whole)
        assert result.stdout == "é" * 250 + "€" * 167


def test_the_streams_own_bad_byte_is_still_the_callers_errors_to_handle():
    argv = [PY, "-c", "import sys; sys.stdout.buffer.write(b'ab\\xffcd')"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", processkit.CaptureTruncated)
        result = processkit.run(argv, capture_output=True, capture_max_bytes=3, capture_keep="tail", errors="replace")
        assert result.stdout == "\ufffdcd"
        with pytest.raises(UnicodeDecodeError):
            processkit.run(argv, capture_output=True, capture_max_bytes=3, capture_keep="tail", text=True)
