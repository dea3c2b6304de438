"""``TimeoutExpired.timeout`` is the number the caller gave, as subprocess keeps it: it was read
back from the run's ``timeout`` event, in whole milliseconds over 1000, so ``timeout=1`` came
back as ``1.0`` and ``timeout=1.0004`` as ``1.0``. A duration string (``"300ms"``), which
subprocess does not take, is its seconds; an ``idle_timeout`` that ended the run is its own."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

import processkit

SLEEP = ["sleep", "30"]


def _subprocess_timeout(given: float, tmp_path) -> subprocess.TimeoutExpired:
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        subprocess.run(SLEEP, timeout=given, capture_output=True, cwd=tmp_path)
    return raised.value


def _same(ours: subprocess.TimeoutExpired, theirs: subprocess.TimeoutExpired, given: float) -> None:
    assert (type(ours.timeout), ours.timeout) == (type(theirs.timeout), theirs.timeout) == (type(given), given)
    assert str(ours).startswith(str(theirs)), (str(ours), str(theirs))


@pytest.mark.parametrize("given", [1, 1.0004])
def test_run_keeps_the_callers_timeout(given, tmp_path):
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        processkit.run(SLEEP, timeout=given, capture_output=True, cwd=tmp_path)
    _same(raised.value, _subprocess_timeout(given, tmp_path), given)


def test_run_async_keeps_it(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        asyncio.run(processkit.run_async(SLEEP, timeout=1, capture_output=True, cwd=tmp_path))
    _same(raised.value, _subprocess_timeout(1, tmp_path), 1)


def test_an_idle_timeout_and_a_duration_string(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        processkit.run(SLEEP, timeout=60, idle_timeout=1, capture_output=True, cwd=tmp_path)
    assert (type(raised.value.timeout), raised.value.timeout) == (int, 1)
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        processkit.run(SLEEP, timeout="300ms", capture_output=True, cwd=tmp_path)
    assert raised.value.timeout == 0.3


def test_a_float_subclass_is_kept(tmp_path):
    """A ``float`` subclass (``numpy.float64``) is the caller's number too, as subprocess keeps it."""

    class Seconds(float):
        pass

    given = Seconds(1.0004)
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        processkit.run(SLEEP, timeout=given, capture_output=True, cwd=tmp_path)
    _same(raised.value, _subprocess_timeout(given, tmp_path), given)
