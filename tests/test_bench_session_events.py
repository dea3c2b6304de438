"""What ``bench`` makes once a session rather than around every run (issue 49, bench/README.md):
the exit clock's perf events (``benchmark/exit_clock.py``), from which every run still gets its
root's exit time, also once the rings have wrapped past their end; and a keeper of each perf
counter's kind (``benchmark/counters.py``), so a run's own counters do not switch the kernel's
event code on and off; all of them closed with the session."""

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
    engine = driver.Engine(Options(timeout_ms=20000), ends_descendants=False, lodged=False)
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


def perf_fds() -> int:
    """This process's perf event descriptors."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[perf_event]"
        except OSError:  # the listing's own descriptor, gone by now
            continue
    return found


def test_a_counters_kind_stays_switched_on_between_runs_and_nothing_outlives_the_session():
    from processkit.benchmark import driver
    from processkit.benchmark.plan import Options

    before = perf_fds()
    engine = driver.Engine(Options(timeout_ms=20000), ends_descendants=False, lodged=False)
    try:
        runs = [engine.measure(("sh", "-c", "exit 0"), None, str(i), "null") for i in range(2)]
        counted = [name for name, value in (runs[-1].counters or {}).items() if value is not None]
        if not counted:
            pytest.skip("no perf counters here")
        # the exit clock's event per CPU, and its ring's mapping's own copy of the descriptor
        rings = 0 if engine._exit_clock.unavailable else 2 * len(os.sched_getaffinity(0))
        between = perf_fds() - before  # the run's own counters are closed by now
    finally:
        engine.close()
    assert between == rings + len(counted), (between, rings, counted)
    assert perf_fds() == before
