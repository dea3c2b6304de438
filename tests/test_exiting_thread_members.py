"""A grandchild whose leader thread ended alone (``pthread_exit``) while a thread of it ran on,
the runner reading the members as that last thread was in its exit: its group's
``cgroup.procs`` leaves such a process out once its last thread's exit has begun, while that
thread keeps the group populated until the exit is done, so the lists read empty three times
and the read was taken as failed: `resource_summary` and `cleanup_started` said `read_error:
true` (every figure null, the members not counted) of a tree that was only finishing its
exit, on most runs, under either pump. A subtree whose every listed thread has begun its exit
now holds their processes, members until their exit is done, which the teardown waits out;
nor is such a process (or one whose last thread exits) said to be left running by the child.

The exit is held open, not raced: the thread holds a file of a FUSE file system this test
serves, whose ``FLUSH`` (sent as the exiting thread closes its files, after its exit has begun
and before it leaves its group) is answered only once the runner has written
`cleanup_started`. (It was a large memory freed, tried up to 8 times: a loaded host's runner
read after the exit was done on every try, now and then.)"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import threading

import pytest
from conftest import SAFETY_NET, read_events, reaped, start_cli, wait_for_event
from streams import PY, one, require_mechanism

from processkit.containment import cgroupfs
from processkit.containment.cgroup_v2 import CgroupV2

# The grandchild lets the run's pipes go, opens the held file in a thread, ends its leader
# alone; the thread then exits, closing the file. The child ends once the test releases it.
TREE = r"""
import ctypes, os, sys, threading, time
held, release = sys.argv[1:]
if os.fork() == 0:
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    def work():
        os.open(held, os.O_RDONLY)
        os._exit(0)
    threading.Thread(target=work).start()
    ctypes.CDLL(None).pthread_exit(None)
while not os.path.exists(release):
    time.sleep(0.01)
"""

_IN = struct.Struct("<IIQQIIIHH")  # fuse_in_header
LOOKUP, GETATTR, OPEN, FLUSH, INIT = 1, 3, 14, 25, 26
NO_REPLY = (2, 36, 42)  # FORGET, INTERRUPT, BATCH_FORGET
MS_NOSUID_NODEV = 6
MNT_DETACH = 2


def _attr(ino: int, mode: int, links: int) -> bytes:
    return struct.pack("<QQQQQQIIIIIIIIII", ino, 0, 0, 0, 0, 0, 0, 0, 0, mode, links, 0, 0, 0, 4096, 0)


class HeldFlush:
    """A FUSE file system of one empty file, ``f``, served on a thread, its first ``FLUSH``
    held: ``flushing`` is set as it comes, ``answer`` lets it through."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.flushing = threading.Event()
        self._answer = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def answer(self) -> None:
        self._answer.set()

    def _reply(self, unique: int, body: bytes = b"", error: int = 0) -> None:
        os.write(self.fd, struct.pack("<IiQ", 16 + len(body), error, unique) + body)

    def _serve(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 1 << 18)
            except OSError:  # unmounted (ENODEV), or the descriptor closed
                return
            _, opcode, unique, node, *_ = _IN.unpack_from(data)
            if opcode == INIT:
                self._reply(unique, struct.pack("<IIIIHHIIHHII", 7, 31, 0, 0, 0, 0, 4096, 0, 0, 0, 0, 0) + bytes(24))
            elif opcode == LOOKUP and data[_IN.size : -1] == b"f":
                self._reply(unique, struct.pack("<QQQQII", 2, 0, 0, 0, 0, 0) + _attr(2, 0o100644, 1))
            elif opcode == LOOKUP:
                self._reply(unique, error=-2)
            elif opcode == GETATTR:
                self._reply(
                    unique,
                    struct.pack("<QII", 0, 0, 0) + (_attr(1, 0o40755, 2) if node == 1 else _attr(2, 0o100644, 1)),
                )
            elif opcode == OPEN:
                self._reply(unique, struct.pack("<QIi", 0, 0, 0))
            elif opcode == FLUSH and not self.flushing.is_set():
                self.flushing.set()
                self._answer.wait(SAFETY_NET)
                self._reply(unique)
            elif opcode not in NO_REPLY:
                self._reply(unique)


@contextlib.contextmanager
def held_flush(mountpoint):
    """``HeldFlush`` mounted at ``mountpoint``; unmounted on the way out (a flush never answered
    then ends with the connection)."""
    libc = ctypes.CDLL(None, use_errno=True)
    os.mkdir(mountpoint)
    try:
        fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        pytest.skip(f"no FUSE here: {exc}")
    options = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"processkit-test", bytes(mountpoint), b"fuse", MS_NOSUID_NODEV, options) != 0:
        os.close(fd)
        pytest.skip(f"cannot mount a FUSE file system here: {os.strerror(ctypes.get_errno())}")
    served = HeldFlush(fd)
    try:
        yield served
    finally:
        served.answer()
        libc.umount2(bytes(mountpoint), MNT_DETACH)
        os.close(fd)


def test_a_tree_finishing_its_exit_is_no_read_error_nor_left_running(tmp_path, pump_backend):
    stream, release = tmp_path / "run.jsonl", tmp_path / "release"
    with held_flush(tmp_path / "m") as served:
        argv = ["run", "--jsonl", stream, "--", PY, "-c", TREE, tmp_path / "m" / "f", release]
        with reaped(start_cli(*argv, cwd=tmp_path)) as runner:
            assert served.flushing.wait(SAFETY_NET), "the thread's exit never closed the held file"
            release.touch()  # the child ends: the runner reads the members while that exit is held
            wait_for_event(stream, "cleanup_started")
            served.answer()
            _, err = runner.communicate(timeout=SAFETY_NET)
    assert runner.returncode == 0, err
    events = read_events(stream)
    require_mechanism(events, "cgroup_v2")
    assert one(events, "resource_summary")["read_error"] is False, events
    started = one(events, "cleanup_started")
    assert started["read_error"] is False and started["members_before"] == 1, started  # counted by its thread
    finished = one(events, "cleanup_finished")
    assert finished["read_error"] is False and finished["remaining"] == 0, finished
    assert b"still running" not in err, err  # it was on its way out, not left running


def _group(path) -> CgroupV2:
    """A stand-in v2 group: a directory with the files ``member_pids`` reads, both lists empty."""
    path.mkdir()
    for name, text in (("cgroup.events", "populated 1\n"), ("cgroup.procs", ""), ("cgroup.threads", "")):
        (path / name).write_text(text)
    group = CgroupV2.__new__(CgroupV2)
    group.path, group._dir_fd = str(path), -1
    return group


@pytest.mark.parametrize("unreadable_below", [False, True])
def test_a_populated_subtree_listing_no_thread_is_a_read_error_not_empty(tmp_path, unreadable_below):
    """A member moving between groups that every read missed, or one in a group below whose
    ``cgroup.threads`` cannot be read (the child owns the groups it makes): the subtree is
    populated, so its members are not none."""
    group = _group(tmp_path / "g")
    if unreadable_below:
        (tmp_path / "g" / "below").mkdir()  # no cgroup.threads to read
    with pytest.raises(OSError):
        group.member_pids()


def test_a_subtree_that_lists_no_thread_once_emptied_has_no_members(tmp_path, monkeypatch):
    group = _group(tmp_path / "g")
    reads = iter([True, True, True, False])  # populated through the three reads, then emptied
    monkeypatch.setattr(cgroupfs, "populated", lambda where: next(reads))
    assert group.member_pids() == []
