"""A run its timeout ended whose output asked for was cut at the caller's cap: the
TimeoutExpired carried the cut bytes as the whole output, and nothing said a byte was lost,
where the same cut on a run that ends by itself is a CaptureTruncated warning (docs/api.md)."""

from __future__ import annotations

import asyncio
import subprocess
import warnings

import pytest

import processkit

# 5000 bytes at once, then a wait the timeout ends (3 s: the bytes are out long before, even on a
# loaded machine).
ARGV = ["sh", "-c", "head -c 5000 /dev/zero; exec sleep 60"]


def test_a_timeout_says_the_cut_of_its_output():
    with pytest.warns(processkit.CaptureTruncated, match="stdout cut by capture_max_bytes: 4000 of 5000 bytes lost"):
        with pytest.raises(subprocess.TimeoutExpired) as raised:
            processkit.run(ARGV, capture_output=True, capture_max_bytes=1000, timeout=3)
    assert len(raised.value.stdout) == 1000
    assert raised.value.result.stdout_capture.bytes_seen == 5000


def test_run_async_says_it_too():
    with pytest.warns(processkit.CaptureTruncated, match="4000 of 5000 bytes lost"):
        with pytest.raises(subprocess.TimeoutExpired):
            asyncio.run(processkit.run_async(ARGV, stdout=subprocess.PIPE, capture_max_bytes=1000, timeout=3))


def test_under_warnings_as_errors_the_warning_holds_the_timed_out_result():
    with warnings.catch_warnings():
        warnings.simplefilter("error", processkit.CaptureTruncated)
        with pytest.raises(processkit.CaptureTruncated) as said:
            processkit.run(ARGV, capture_output=True, capture_max_bytes=1000, timeout=3)
    assert (said.value.result.returncode, said.value.result.source) == (106, "timeout")
