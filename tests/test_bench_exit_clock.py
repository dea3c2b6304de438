"""``bench``'s exit clock (``benchmark/exit_clock.py``) is the session's: its perf events are
made once, not around every run (issue 49: a fifth of a ``true`` run's cycle), and every run
still gets its root's exit time from them, also once the rings have wrapped past their end."""

from __future__ import annotations

import os

import pytest

TREE = "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do /bin/true; done"


def test_a_sessions_runs_share_one_set_of_events_and_each_gets_its_exit_time(monkeypatch):
    from processkit.benchmark import driver, exit_clock
    from processkit.benchmark.plan import Options

    opened = []
    real = exit_clock.perf_event_open
    monkeypatch.setattr(exit_clock, "perf_event_open", lambda *args: opened.append(args) or real(*args))
    # 4 KiB rings: a run's 21 processes write ~1.3 KiB of FORK and EXIT records (32 bytes each)
    # into them, so 12 runs take each ring past its end and records straddle it.
    monkeypatch.setattr(exit_clock, "DATA_PAGES", 1)
    engine = driver.Engine(Options(timeout_ms=20000), owns_process=False, lodged=False)
    clock = engine._exit_clock
    if clock.open() is None:
        engine.close()
        pytest.skip(f"no perf events here: {clock.unavailable}")
    times = []
    real_read = clock.read
    monkeypatch.setattr(clock, "read", lambda rings: times.append(real_read(rings)) or times[-1])
    try:
        runs = [engine.measure(("sh", "-c", TREE), None, str(i), "null") for i in range(12)]
        runs.append(engine.measure(("sh", "-c", "exit 3")))
    finally:
        engine.close()
    assert [run.exit_code for run in runs] == [0] * 12 + [3]
    assert None not in times, times  # every run timed by its root's exit, wrapped rings included
    assert len(opened) == len(os.sched_getaffinity(0)), opened  # one event per CPU, for the session
    assert all(run.wall_ns is not None and run.wall_ns > 0 for run in runs)
