"""A run the kernel's OOM killer hit (under ``max_memory``) raised, with ``check=True``, a
RunError saying only ``ended with code -9 (source: child_exit)``, where the CLI's ``run`` warns
``the kernel's OOM killer ended 1 process(es) of this run's tree``: the error now says it."""

from __future__ import annotations

import sys

import pytest

import processkit

HOG = [sys.executable, "-c", "block = bytearray(400 << 20)\nfor i in range(0, len(block), 4096): block[i] = 1"]


def test_an_oom_kill_is_said_by_the_error(tmp_path):
    with pytest.raises(processkit.RunError) as raised:
        processkit.run(HOG, max_memory="64m", capture_output=True, check=True, cwd=str(tmp_path))
    result = raised.value.result
    if not result.oom_killed:
        pytest.skip("no OOM kill counted here (no memory cap, or no counter of it)")
    assert result.returncode == -9
    assert "; the kernel's OOM killer ended 1 process(es) of its tree" in str(raised.value)
