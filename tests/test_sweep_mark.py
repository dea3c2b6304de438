"""The ``sweeping`` mark (containment/sweep_mark.py), over real directories and real flocks in
tmp_path: made only through a descriptor of the run directory the sweep holds the lock of, and
trusted by a waiting sweep (``prune``) only when it names another process holding that lock,
within one deadline for the whole sweep. A real sweep at work is still waited for:
tests/test_prune_waits_for_a_sweep.py."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

from processkit import rundir
from processkit.containment import sweep, sweep_mark


def _run_dir(base, token: str, marker: str | None):
    """A private run directory for ``token`` under ``base``, its lock held by this process (the
    descriptor returned), and a ``sweeping`` file saying ``marker``."""
    path = base / (rundir.DIR_PREFIX + token)
    path.mkdir(mode=0o700)
    lock = os.open(path / rundir.LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if marker is not None:
        (path / rundir.SWEEPING_NAME).write_text(marker)
    return path, lock


def _reap(base, tokens: list[str]) -> sweep.Reaped:
    reaped = sweep.Reaped()
    for token in tokens:
        assert not sweep._reap_run(token, None, list, reaped, False, True, frozenset(), [str(base)])
    return reaped


class _SleptClock:
    """The sweep's ``time``: a clock only the sweep's own sleeps move, so its waits are counted
    in the seconds it asked for, whatever else the host is doing."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_planted_directories_cost_one_shared_wait(tmp_path, monkeypatch):
    # Another user's plants: each lock held by the planter (here this process), each mark
    # naming it. Each looks like a sweep at work; all of them together cost one deadline.
    monkeypatch.setattr(sweep, "SWEEP_WAIT_SECONDS", 1.0)
    clock = _SleptClock()
    monkeypatch.setattr(sweep, "time", clock)
    tokens = [f"1-abc-{n}" for n in range(5)]
    locks = [_run_dir(tmp_path, token, str(os.getpid()))[1] for token in tokens]
    try:
        reaped = _reap(tmp_path, tokens)
    finally:
        for lock in locks:
            os.close(lock)
    assert [entry["reason"] for entry in reaped.left] == ["another sweep is still ending it"] * len(tokens)
    assert clock.now < 3.5, clock.now  # five runs at one second each before: one deadline for them all now


@pytest.mark.parametrize("marker", ["runner", "not the holder", "junk"])
def test_a_live_runners_directory_is_not_waited_for(tmp_path, monkeypatch, marker):
    # A mark its owner dropped into a live runner's directory: naming the runner itself (the
    # token's pid holds the lock), a process that does not hold it, or nothing at all.
    monkeypatch.setattr(sweep, "SWEEP_WAIT_SECONDS", 30.0)
    token = f"{os.getpid()}-abc-1"
    text = {"runner": str(os.getpid()), "not the holder": str(os.getppid()), "junk": "x" * 10}[marker]
    _, lock = _run_dir(tmp_path, token, text)
    try:
        reaped = _reap(tmp_path, [token])
    finally:
        os.close(lock)
    assert reaped.left == [] and reaped.wait_until is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a mark owned by another user")
def test_a_mark_another_user_owns_is_not_waited_for(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "SWEEP_WAIT_SECONDS", 30.0)
    path, lock = _run_dir(tmp_path, "1-abc-2", str(os.getpid()))
    os.chown(path / rundir.SWEEPING_NAME, 65534, 65534)
    try:
        reaped = _reap(tmp_path, ["1-abc-2"])
    finally:
        os.close(lock)
    assert reaped.left == [] and reaped.wait_until is None


def test_the_mark_is_made_in_the_locked_directory_only(tmp_path, monkeypatch):
    # The run's directory swapped for a link after rundir.locate saw it: the sweep holds the
    # lock the link leads to, and makes no mark where the link points.
    token = "1-abc-3"
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    os.close(os.open(target / rundir.LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600))
    path = tmp_path / (rundir.DIR_PREFIX + token)
    path.symlink_to(target)
    monkeypatch.setattr(rundir, "locate", lambda token, where=None: (str(path), os.getuid()))
    sweep._reap_run(token, None, list, sweep.Reaped(), False, True, frozenset(), [str(tmp_path)])
    assert sorted(os.listdir(target)) == [rundir.LOCK_NAME]


def test_a_sweep_names_itself_in_its_mark(tmp_path):
    path, lock = _run_dir(tmp_path, "1-abc-4", None)
    try:
        sweep_mark.mark(str(path), os.getuid(), lock)
        assert (path / rundir.SWEEPING_NAME).read_text() == str(os.getpid())
        assert sweep_mark.sweep_holds(str(path), os.getuid(), "1-abc-4")
        assert not sweep_mark.sweep_holds(str(path), os.getuid(), f"{os.getpid()}-abc-4")
    finally:
        os.close(lock)


def test_a_dead_sweeps_mark_is_replaced(tmp_path):
    # A sweep killed mid-way left its mark naming a pid now gone: the next sweep takes the name.
    gone = subprocess.Popen(["true"])
    gone.wait()
    path, lock = _run_dir(tmp_path, "1-abc-5", str(gone.pid))
    try:
        sweep_mark.mark(str(path), os.getuid(), lock)
        assert (path / rundir.SWEEPING_NAME).read_text() == str(os.getpid())
    finally:
        os.close(lock)


def test_a_live_holders_mark_is_left(tmp_path):
    # The mark names a process that holds the run's lock now: it is not a dead sweep's.
    path, lock = _run_dir(tmp_path, "1-abc-6", None)
    os.close(lock)
    hold = "import fcntl, os, sys; fcntl.flock(os.open(sys.argv[1], os.O_RDWR), fcntl.LOCK_EX); print(flush=True); sys.stdin.read()"
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(path / rundir.LOCK_NAME)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"\n"
        (path / rundir.SWEEPING_NAME).write_text(str(holder.pid))
        other = os.open(path / rundir.LOCK_NAME, os.O_RDWR)
        try:
            sweep_mark.mark(str(path), os.getuid(), other)
        finally:
            os.close(other)
        assert (path / rundir.SWEEPING_NAME).read_text() == str(holder.pid)
    finally:
        holder.communicate(b"")


def test_the_dead_mark_says_when_the_run_was_first_seen_dead_and_nothing_else_speaks_for_it(tmp_path):
    path, lock = _run_dir(tmp_path, "1-abc-0", None)
    owner = os.getuid()
    try:
        assert sweep_mark.dead_for(str(path), owner, lock) == 0.0  # the first sweep marks it now
        made = os.lstat(path / rundir.DEAD_NAME).st_mtime
        assert sweep_mark.dead_for(str(path), owner, lock) >= 0.0  # later ones read the mark's time
        os.utime(path / rundir.DEAD_NAME, (made - 60, made - 60))
        assert sweep_mark.dead_for(str(path), owner, lock) >= 60
        os.utime(path / rundir.DEAD_NAME, (made + 3600, made + 3600))  # ahead of the clock
        assert sweep_mark.dead_for(str(path), owner, lock) is None
        os.unlink(path / rundir.DEAD_NAME)
        other, other_lock = _run_dir(tmp_path, "1-abc-1", None)  # a lock this sweep holds, elsewhere
        assert sweep_mark.dead_for(str(path), owner, other_lock) is None
        assert not os.path.lexists(path / rundir.DEAD_NAME)
        os.close(other_lock)
        target = tmp_path / "target"
        os.symlink(target, path / rundir.DEAD_NAME)  # never followed
        assert sweep_mark.dead_for(str(path), owner, lock) is None and not target.exists()
        os.unlink(path / rundir.DEAD_NAME)
        os.mkfifo(path / rundir.DEAD_NAME)  # never opened: no wait for a writer
        assert sweep_mark.dead_for(str(path), owner, lock) is None
    finally:
        os.close(lock)
