"""Who holds a dead run's lock (containment/sweep_mark.py), over real directories and real flocks
in tmp_path: a waiting sweep (``prune``) waits only for a holder ``/proc/locks`` shows that is not
the run's runner (the token's pid), within one deadline for the whole sweep; and the ``dead``
mark, made only through a descriptor of the run directory the sweep holds the lock of. A real
sweep at work is still waited for: tests/test_prune_waits_for_a_sweep.py and
tests/test_prune_held_lock.py."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time


from processkit import rundir
from processkit.containment import sweep, sweep_mark


def _run_dir(base, token: str):
    """A private run directory for ``token`` under ``base``, its lock held by this process (the
    descriptor returned)."""
    path = base / (rundir.DIR_PREFIX + token)
    path.mkdir(mode=0o700)
    lock = os.open(path / rundir.LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
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
    # Another user's plants: each lock held by the planter (here this process), which is not
    # the runner its token names. Each looks like a sweep at work; all together cost one deadline.
    monkeypatch.setattr(sweep, "SWEEP_WAIT_SECONDS", 1.0)
    clock = _SleptClock()
    monkeypatch.setattr(sweep, "time", clock)
    tokens = [f"1-abc-{n}" for n in range(5)]
    locks = [_run_dir(tmp_path, token)[1] for token in tokens]
    try:
        reaped = _reap(tmp_path, tokens)
    finally:
        for lock in locks:
            os.close(lock)
    reason = f"process {os.getpid()}, not its runner, still holds its lock"
    assert [entry["reason"] for entry in reaped.left] == [reason] * len(tokens)
    assert clock.now < 3.5, clock.now  # five runs at one second each before: one deadline for them all now


def test_a_live_runners_directory_is_not_waited_for(tmp_path, monkeypatch):
    # The token's pid holds the lock: its runner, alive.
    monkeypatch.setattr(sweep, "SWEEP_WAIT_SECONDS", 30.0)
    token = f"{os.getpid()}-{time.time_ns():x}-1"
    _, lock = _run_dir(tmp_path, token)
    try:
        reaped = _reap(tmp_path, [token])
        assert sweep_mark.other_holder(os.fstat(lock), token) is None
    finally:
        os.close(lock)
    assert reaped.left == [] and reaped.wait_until is None


_HOLD = (
    "import fcntl, os, sys; fcntl.flock(os.open(sys.argv[1], os.O_RDWR), fcntl.LOCK_EX); print(flush=True);"
    " sys.stdin.read()"
)


def _holder(lock_path) -> subprocess.Popen:
    """A process holding the flock on ``lock_path`` until its stdin closes."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(lock_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"\n"
    return holder


def test_another_process_holding_the_lock_is_named_and_a_freed_lock_taken(tmp_path):
    path, lock = _run_dir(tmp_path, "1-abc-4")
    os.close(lock)
    held = os.stat(path / rundir.LOCK_NAME)
    holder = _holder(path / rundir.LOCK_NAME)
    try:
        assert sweep_mark.other_holder(held, "1-abc-4") == holder.pid
        now = time.time_ns()
        assert sweep_mark.other_holder(held, f"{holder.pid}-{now:x}-4") is None  # its runner
        # a later process given the dead runner's pid (the token a minute older than it)
        assert sweep_mark.other_holder(held, f"{holder.pid}-{now - 60 * 10**9:x}-4") == holder.pid
        # /proc/locks names the inode's super block, which may not be st_dev (btrfs, overlayfs)
        elsewhere = os.stat_result((held.st_mode, held.st_ino, held.st_dev + 1, *tuple(held)[3:10]))
        assert sweep_mark.other_holder(elsewhere, "1-abc-4") == holder.pid
    finally:
        holder.communicate(b"")
    assert sweep_mark.other_holder(held, "1-abc-4") == 0  # none shown


def test_a_holder_letting_go_before_its_holders_are_read_never_has_the_run_taken_for_live(tmp_path, monkeypatch):
    # The other sweep lets go between prune's failed attempt and its read of /proc/locks: that
    # read shows no holder. Taken for the runner then, the dead run was left, prune saying
    # nothing; the lock is tried again at once now, and the run ended.
    token = "1-abc-5"
    path, lock = _run_dir(tmp_path, token)
    os.close(lock)
    holder = _holder(path / rundir.LOCK_NAME)
    read = sweep_mark.other_holder

    def let_go_first(*args):
        if holder.poll() is None:
            holder.communicate(b"")
        return read(*args)

    monkeypatch.setattr(sweep_mark, "other_holder", let_go_first)
    monkeypatch.setattr(rundir, "locate", lambda token, where=None: (str(path), os.getuid()))
    reaped = sweep.Reaped()
    try:
        ended = sweep._reap_run(token, None, list, reaped, False, True, frozenset(), [str(tmp_path)])
    finally:
        if holder.poll() is None:
            holder.communicate(b"")
    assert ended and reaped.left == [] and not path.exists(), reaped.as_json()


def test_the_dead_mark_is_made_in_the_locked_directory_only(tmp_path, monkeypatch):
    # The run's directory swapped for a link after rundir.locate saw it: the sweep holds the
    # lock the link leads to, and makes no ``dead`` mark (a grace sweep's) where the link points.
    token = "1-abc-3"
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    os.close(os.open(target / rundir.LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600))
    path = tmp_path / (rundir.DIR_PREFIX + token)
    path.symlink_to(target)
    monkeypatch.setattr(rundir, "locate", lambda token, where=None: (str(path), os.getuid()))
    sweep._reap_run(token, None, list, sweep.Reaped(), False, True, frozenset(), [str(tmp_path)], grace=60.0)
    assert sorted(os.listdir(target)) == [rundir.LOCK_NAME]


def test_the_dead_mark_says_when_the_run_was_first_seen_dead_and_nothing_else_speaks_for_it(tmp_path):
    path, lock = _run_dir(tmp_path, "1-abc-0")
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
        other, other_lock = _run_dir(tmp_path, "1-abc-1")  # a lock this sweep holds, elsewhere
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
