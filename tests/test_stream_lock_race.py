"""A stream's lock let go between a run's refused ``F_OFD_SETLK`` and its ``F_OFD_GETLK`` (which
lock was in the way) made that run write its stream unlocked, the file free: the next run took the
lock and emptied the stream under it. ``lock_stream`` now asks for the lock again when the lock in
its way is gone. The moment cannot be met between processes without a hook, so this is the
function itself, the earlier holder's description closed exactly then, with and without the C
module."""

from __future__ import annotations

import os
import sys

import pytest

from processkit import native


@pytest.mark.parametrize("with_c", [True, False], ids=["native", "no-native"])
def test_a_lock_let_go_meanwhile_is_taken_not_left(tmp_path, monkeypatch, with_c):
    if with_c:
        pytest.importorskip("processkit._native")
    else:
        monkeypatch.setitem(sys.modules, "processkit._native", None)
    path = tmp_path / "run.jsonl"
    earlier = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    native.lock_stream(earlier)  # an earlier run's runner
    asked = native._lock_in_the_way

    def ended_meanwhile(fd: int):
        os.close(earlier)  # that runner's end: its lock goes with its description
        monkeypatch.setattr(native, "_lock_in_the_way", asked)
        return asked(fd)

    monkeypatch.setattr(native, "_lock_in_the_way", ended_meanwhile)
    this = os.open(path, os.O_RDWR)
    native.lock_stream(this)
    later = os.open(path, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):  # this run holds the stream: the next is refused
            native.lock_stream(later)
    finally:
        os.close(later)
        os.close(this)
