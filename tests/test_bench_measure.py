"""What ``bench`` measures, against workloads whose cost is known, and the statistics behind it."""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import processkit
from processkit.benchmark import BenchResult, driver, stats
from processkit.errors import Failure

from run_groups import groups_of

MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def this_process_as_it_was():
    """What in-process measuring changes here goes back after each test: a subreaper pytest
    would collect (as zombies it never reaps) the orphans other test files expect to vanish."""
    was = subreaper()
    yield
    subreaper(set_to=was)


HOLD = "import sys, time; x = b'x' * ({mib} << 20); time.sleep({sleep})"
BURN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass"


def test_a_processs_peak_memory_is_measured():
    measured = driver.measure(("python3", "-c", HOLD.format(mib=80, sleep=0)))
    assert measured.exit_code == 0, measured.error
    assert 80 * MIB <= measured.peak_memory_bytes <= 80 * MIB + 40 * MIB


# Holds ``mib`` MiB, says so with a file, and exits only once the other holder has said so too:
# both hold theirs at once whatever the host's speed (45 s without the other: it exits 3).
HOLD_TOGETHER = (
    "import os, sys, time; x = b'x' * ({mib} << 20); open(sys.argv[1], 'w').close(); "
    "deadline = time.monotonic() + 45\n"
    "while not os.path.exists(sys.argv[2]):\n"
    "    if time.monotonic() > deadline: sys.exit(3)\n"
    "    time.sleep(0.01)"
)


def test_a_trees_memory_is_the_whole_trees(tmp_path):
    """Two concurrent holders of 60 MiB: the tree held 120 MiB at once, which a group's counter
    sees (the largest member alone, as ``ru_maxrss`` would say, is 60 MiB)."""
    holder = HOLD_TOGETHER.format(mib=60)
    one, other = tmp_path / "one", tmp_path / "other"
    tree = f'python3 -c "{holder}" {one} {other} & python3 -c "{holder}" {other} {one}; wait'
    measured = driver.measure(("sh", "-c", tree))
    assert measured.exit_code == 0, measured.error
    source = measured.usage.sources.get("peak_memory_bytes", "")
    if "memory." not in source:
        pytest.skip(f"no cgroup counts this host's memory (here: {source or 'nothing'})")
    assert 120 * MIB <= measured.peak_memory_bytes <= 120 * MIB + 40 * MIB, source


def test_the_whole_trees_cpu_is_counted_children_included():
    burn = BURN.format(seconds=0.15)
    tree = f"python3 -c '{burn}' & python3 -c '{burn}'; wait"
    measured = driver.measure(("sh", "-c", tree))
    assert measured.exit_code == 0, measured.error
    cpu = (measured.user_ns + measured.system_ns) / 1e9
    # Both children's 0.15 s (each burns until its own CPU clock says so, however loaded the
    # host), plus two interpreters' start-up, ~20 ms of CPU each: 0.4 s above is ten times that,
    # so only a gross over-count (a unit, the runner's own work taken in) goes past it.
    assert 0.3 <= cpu <= 0.3 + 0.4


def test_cpu_of_a_member_still_running_when_the_root_exits_is_counted(tmp_path):
    """The orphan burns 0.2 s of CPU, says so in a file, and sleeps; the root exits on seeing the
    file, and teardown kills the orphan: its CPU is the tree's, though nobody in it waited for it."""
    done = tmp_path / "done"
    orphan = BURN.format(seconds=0.2) + f"\nopen({str(done)!r}, 'w').close()\ntime.sleep(60)"
    (tmp_path / "orphan.py").write_text(orphan)
    script = f"python3 {tmp_path / 'orphan.py'} & while [ ! -e {done} ]; do sleep 0.01; done"
    measured = driver.measure(("sh", "-c", script))
    assert measured.exit_code == 0, measured.error
    # the tree's CPU; the root's rusage (user_ns and system_ns) holds none of the orphan's
    assert measured.tree_cpu_ns / 1e9 >= 0.2


def test_the_timed_interval_is_the_childs_life():
    """An order on both sides, whatever the host's load: the interval holds the child's 0.2 s
    sleep, and lies inside the call that spawned and reaped it."""
    called = time.monotonic_ns()
    measured = driver.measure(("sleep", "0.2"))
    returned = time.monotonic_ns()
    assert 0.2e9 <= measured.wall_ns <= returned - called


def test_repeated_runs_leave_nothing_behind(isolated_registry):
    """Descriptors, signal handlers, registry entries, run directories, cgroups: as before."""
    from processkit import rundir
    from processkit.containment import cgroup_v2

    mine = f"{rundir.DIR_PREFIX}{os.getpid()}-"
    parent = cgroup_v2.find_parent()

    def leftovers():
        groups = groups_of(os.getpid(), None, parent) if parent and os.path.isdir(parent) else []
        return (
            sorted(n for n in os.listdir(isolated_registry) if not n.endswith(".ended")),  # tombstones: bounded
            [n for n in os.listdir(rundir.base()) if n.startswith(mine)],
            groups,
        )

    fds = sorted(os.listdir("/proc/self/fd"))
    handlers = [signal.getsignal(s) for s in driver.WATCHED]
    before = leftovers()
    for _ in range(5):
        assert driver.measure(("sh", "-c", "sleep 30 & exit 0")).exit_code == 0
    assert sorted(os.listdir("/proc/self/fd")) == fds
    assert [signal.getsignal(s) for s in driver.WATCHED] == handlers
    assert leftovers() == before == ([], [], [])


def subreaper(set_to: int | None = None) -> int:
    import ctypes

    libc = ctypes.CDLL(None)
    if set_to is not None:
        assert libc.prctl(36, set_to, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER (earlier tests set it here)
    flag = ctypes.c_int(-1)
    assert libc.prctl(37, ctypes.byref(flag), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
    return flag.value


def test_the_api_returns_the_typed_result_and_leaves_the_caller_alone():
    before = (subreaper(set_to=0), open("/proc/self/cgroup").read(), os.sched_getaffinity(0))
    handlers = [signal.getsignal(s) for s in driver.WATCHED]
    result = processkit.bench(
        [["true"], "exit 0"], names=["t"], runs=3, order="sequential", cpus=sorted(os.sched_getaffinity(0))[:1]
    )
    assert [r.command.name for r in result.results] == ["t", "exit 0"]
    assert all(r.summary is not None and r.summary.runs == 3 for r in result.results)
    exported = result.to_json()
    assert [r["order"] for r in exported["results"]] == [[0, 1, 2], [3, 4, 5]]
    assert exported["comparison"]["fastest"] in ("t", "exit 0")
    assert (subreaper(), open("/proc/self/cgroup").read(), os.sched_getaffinity(0)) == before
    assert [signal.getsignal(s) for s in driver.WATCHED] == handlers


def test_the_api_raises_the_clis_failure():
    with pytest.raises(Failure) as raised:
        processkit.bench([["false"]], runs=2)
    assert raised.value.code == 118 and "exited with 1" in raised.value.message
    with pytest.raises(ValueError, match="'runs='"):  # checked before the CLI runs, naming the keyword
        processkit.bench([["true"]], runs=0)


def test_a_result_reads_back_from_its_json_with_the_same_statistics():
    result = processkit.bench([["true"], ["sleep", "0.01"]], runs=4, timeout=5)
    again = BenchResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again.to_json() == result.to_json()


def test_outliers_follow_the_modified_z_score():
    assert stats.outlier_indices([0.5, 0.30, 0.29, 0.31, 0.30]) == [0]
    assert stats.outlier_indices([-0.2, 0.0, 0.2]) == []
    assert stats.outlier_indices([10.0] * 7 + [100.0]) == [7]  # a MAD of 0 still flags the odd one


def test_a_slow_first_run_is_noticed():
    assert stats.first_run_slow([0.5, 0.30, 0.29, 0.31, 0.30])
    assert not stats.first_run_slow([0.30, 0.5, 0.29, 0.31, 0.30])


def test_the_ratio_carries_both_uncertainties():
    slow = stats.summarize([2.0, 2.2, 1.8], [0.0] * 3, [0.0] * 3, [None] * 3)
    fast = stats.summarize([1.0, 1.1, 0.9], [0.0] * 3, [0.0] * 3, [None] * 3)
    value, spread = stats.ratio(slow, fast)
    assert value == 2.0
    assert math.isclose(spread, 2.0 * math.hypot(0.2 / 2.0, 0.1 / 1.0))


def test_mann_whitney_separates_and_does_not_invent():
    assert stats.mann_whitney([1.0 + i / 100 for i in range(20)], [2.0 + i / 100 for i in range(20)]) < 1e-6
    same = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert stats.mann_whitney(same, same) > 0.5
    assert stats.mann_whitney([1.0], [2.0, 3.0]) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.001, 10.0), min_size=2, max_size=40))
def test_a_summary_matches_the_statistics_module(times):
    summary = stats.summarize(times, times, times, [1] * len(times))
    assert math.isclose(summary.mean, statistics.fmean(times))
    assert math.isclose(summary.stddev, statistics.stdev(times), abs_tol=1e-12)
    assert summary.min <= summary.median <= summary.max and summary.memory_max == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=30), st.lists(st.floats(0.0, 1.0), min_size=2, max_size=30))
def test_mann_whitney_is_a_symmetric_probability(a, b):
    p = stats.mann_whitney(a, b)
    assert 0.0 <= p <= 1.0
    assert math.isclose(p, stats.mann_whitney(b, a), abs_tol=1e-9)


def test_a_sessions_runs_read_the_working_directory_once_and_run_in_it(tmp_path, monkeypatch):
    """The session's process never changes directory, so its engine reads it once, not a
    ``getcwd`` per run (``RunContext.cwd``); every run's child still starts there."""
    from processkit.benchmark.plan import Options

    monkeypatch.chdir(tmp_path)
    read: list[str] = []
    real = os.getcwd
    monkeypatch.setattr(os, "getcwd", lambda: read.append(real()) or read[-1])
    engine = driver.Engine(Options(), ends_descendants=False, lodged=False)
    try:
        for index in range(3):
            measured = engine.measure(("sh", "-c", f"pwd -P > here-{index}"), None, str(index), "pipe")
            assert measured.exit_code == 0, measured.error
    finally:
        engine.close()
    assert read == [str(tmp_path)]
    assert {(tmp_path / f"here-{index}").read_text().strip() for index in range(3)} == {str(tmp_path.resolve())}
