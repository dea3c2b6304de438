"""A warning of ``asyncio.run(processkit.run_async(...))`` points at the line that made the call.
With no coroutine of the caller's between them, the first frame outside processkit was asyncio's
own (``asyncio/events.py``, the task's step): a warnings filter for the caller's module, or the
line the warning printed, named asyncio's internals."""

from __future__ import annotations

import asyncio
import sys
import warnings

import processkit

FIVE_THOUSAND = ["head", "-c", "5000", "/dev/zero"]


def _warned(record, category: type[Warning]) -> list[tuple[str, int]]:
    return [(w.filename, w.lineno) for w in record if w.category is category]


def test_a_cut_capture_of_a_run_async_given_to_asyncio_run_is_warned_at_that_line(tmp_path):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        line = _line_after()
        result = asyncio.run(processkit.run_async(FIVE_THOUSAND, capture_dir=str(tmp_path), capture_max_bytes=1000))
    assert result.returncode == 0 and result.stdout_capture.truncated
    assert _warned(record, processkit.CaptureTruncated) == [(__file__, line)]


def test_a_lost_stream_of_a_run_async_given_to_asyncio_run_is_warned_at_that_line():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        line = _line_after()
        result = asyncio.run(processkit.run_async(["true"], jsonl="/dev/full"))
    assert result.returncode == 0
    assert _warned(record, processkit.EventsLost) == [(__file__, line)]


def _line_after() -> int:
    """The line after the caller's: the one that makes the call."""
    return sys._getframe(1).f_lineno + 1
