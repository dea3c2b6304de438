"""Reads process facts from /proc: who is alive, their parent, name and start-time token; and
signals a process found by its pid, that one alone (``signal_found``)."""

from __future__ import annotations

import errno
import os

from .. import signum
from ..plain import Plain
from .cgroupfs import read_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotations
    from typing import Callable


class Member(Plain):
    __slots__ = ("pid", "ppid", "name", "start_time", "pgid", "zombie", "session")

    def __init__(
        self,
        pid: int,
        ppid: int | None,
        name: str | None,
        start_time: str | None,  # the kernel's start time in clock ticks, as an opaque decimal token
        pgid: int | None = None,
        zombie: bool = False,
        session: int | None = None,
    ):
        self.pid = pid
        self.ppid = ppid
        self.name = name
        self.start_time = start_time
        self.pgid = pgid
        self.zombie = zombie
        self.session = session

    def as_event(self) -> dict:
        return {"pid": self.pid, "ppid": self.ppid, "name": self.name, "start_time": self.start_time}


def read_stat(pid: int) -> tuple[bytes, list[bytes]]:
    """``/proc/<pid>/stat`` read and split (``split_stat``). Raises the read's OSError:
    FileNotFoundError or ProcessLookupError once the process is gone."""
    return split_stat(read_bytes(f"/proc/{pid}/stat"))


def split_stat(raw: bytes) -> tuple[bytes, list[bytes]]:
    """A ``/proc/<pid>/stat`` line as the process's name (``comm``) and the fields after it:
    ``[0]`` its state (proc(5)'s field 3), ``[1]`` its parent, ``[2]`` its process group,
    ``[3]`` its session, ``[6]`` its flags (``PF_*``), ``[11]`` to ``[14]`` utime, stime, cutime, cstime, ``[19]`` its start
    time. The name is the process's own to choose (``PR_SET_NAME``, its program's file name), so
    it may hold spaces and parentheses: it runs from the first '(' to the last ')', as no field
    after it holds one. No fields where the line has no ')'."""
    close = raw.rfind(b")")
    if close < 0:
        return b"", []
    return raw[raw.find(b"(") + 1 : close], raw[close + 1 :].split()


def read_member(pid: int) -> Member | None:
    """The process's facts, or None when it is already gone. ``zombie``: it has exited, not only
    its main thread (a leader that ended alone, ``pthread_exit``, reads as Z while its other
    threads run on: a live member to count, signal, wait for and list)."""
    try:
        name, fields = read_stat(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return Member(pid, None, None, None)
    return Member(
        pid=pid,
        ppid=int(fields[1]),
        name=name.decode("utf-8", "replace"),
        start_time=fields[19].decode(),
        pgid=int(fields[2]),
        zombie=fields[0] == b"Z" and not _threads_left(pid),
        session=int(fields[3]),
    )


def signal_found(pid: int, signal: int, still: Callable[[int], bool]) -> None:
    """``signal`` to the process found as ``pid`` and to no other: with ``signal_listed``, the one
    place a process found by its pid (a descendant, a group's member) is signalled
    (tests/test_pinned_kills.py). Its pid may have been handed on since it was found (it ended
    and was collected: by its parent, or by this subreaper's last round), so the process the pid
    names now is pinned by a pidfd first, then ``still(pid)`` says whether it is the one found
    (``started_at``: the same start time; or one the caller may end); the signal goes through the
    pidfd, so a process that ends after that look and whose pid is handed on again is never the
    one signalled. Raises ProcessLookupError when it is gone, or the pid names another;
    PermissionError when the kill is refused. Without a pidfd (Linux before 5.3, a sandbox that
    refuses the call) the look comes just before a kill by pid."""
    pinned = _pin(pid)
    try:
        if not still(pid):
            raise ProcessLookupError(errno.ESRCH, "the pid names another process now")
        _send(pinned, pid, signal)
    finally:
        if pinned is not None:
            os.close(pinned)


def signal_listed(pids: list[int], signal: int, listed: Callable[[], list[int]]) -> None:
    """``signal`` to each of ``pids``, a group's members as ``listed()`` read them, that the group
    still lists once they are pinned: each pinned by a pidfd (``PINS`` at a time), the group read
    again once, and the signal sent through the pidfd of each pid it still lists, so a member
    that ended since the first read, its pid handed on outside the group, is not signalled (one
    read for them all, not one a member: bench/README.md, mend69). One gone is skipped; a refused
    signal is raised once the others have had theirs (the first such error), as is an error
    reading the group. A pid that cannot be pinned (no pidfds) is killed by its pid when listed
    again, as ``signal_found`` does."""
    failed: list[OSError] = []
    for start in range(0, len(pids), PINS):
        pinned: dict[int, int | None] = {}
        try:
            for pid in pids[start : start + PINS]:
                try:
                    pinned[pid] = _pin(pid)
                except ProcessLookupError:
                    continue  # gone
            still = set(listed()) if pinned else set()
            for pid, fd in pinned.items():
                try:
                    if pid in still:
                        _send(fd, pid, signal)
                except ProcessLookupError:
                    pass  # ended since: its pid's next holder is not signalled
                except OSError as exc:
                    failed.append(exc)
        finally:
            for fd in pinned.values():
                if fd is not None:
                    os.close(fd)
    if failed:
        raise failed[0]


PINS = 256  # pidfds ``signal_listed`` holds at once: well inside the usual 1,024 descriptors


def _pin(pid: int) -> int | None:
    """A pidfd for the process ``pid`` names now, or None where none can be had; raises
    ProcessLookupError when it is gone."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        raise  # gone
    except OSError:  # no pidfds here (ENOSYS; a sandbox's EPERM); no descriptor left (EMFILE):
        return None  # the look that follows cannot read either, and takes it for gone


def _send(pinned: int | None, pid: int, signal: int) -> None:
    """``signal`` through the pidfd ``pinned``, or by ``pid`` where there is none (looked at just
    before)."""
    if pinned is None:
        os.kill(pid, signal)
    else:
        signum.pidfd_send_signal(pinned, signal)


def started_at(start_time: str | None) -> Callable[[int], bool]:
    """For ``signal_found``: whether the process a pid names now started when the one found did
    (its start time in clock ticks, ``Member.start_time``); False once it is gone."""

    def still(pid: int) -> bool:
        try:
            fields = read_stat(pid)[1]
        except OSError:
            return False
        return start_time is not None and fields[19:20] == [start_time.encode()]

    return still


def kill_ended_alone(pids: list[int], live_threads: set[int]) -> None:
    """SIGKILL by pid (pinned: ``signal_found``) each of ``pids`` whose main thread alone has
    ended (state Z, another thread left), once ``cgroup.kill`` was written: the kernel sends that kill to each process's
    leader alone, which takes no signal once it has exited, so such a process would run on
    (and a later ``cgroup.kill`` skips it, its kill pending). Its pid is its own while
    ``cgroup.procs`` lists it. ``live_threads``: the ``cgroup.threads`` of the group and every
    group below it, read after their ``cgroup.procs`` gave ``pids``; a pid it lists has a live
    main thread, so only the others are read (a /proc read each, on the runner's loop:
    thousands of members still exiting after the kill held it for tens of milliseconds)."""
    for pid in [pid for pid in pids if pid not in live_threads]:
        try:
            _, fields = read_stat(pid)
            if fields[:1] == [b"Z"] and _threads_left(pid):
                signal_found(pid, signum.SIGKILL, started_at(fields[19].decode()))
        except OSError:
            continue  # gone: nothing to kill


def _threads(pid: int, most: int) -> list[int] | None:
    """Up to ``most`` of the process's thread ids, its leader's among them (``/proc/<pid>/task``,
    read no further: a process may have thousands); None once it is gone or unreadable."""
    try:
        with os.scandir(f"/proc/{pid}/task") as tasks:
            return [int(entry.name) for _, entry in zip(range(most), tasks)]
    except (OSError, ValueError):
        return None


def _threads_left(pid: int) -> bool:
    """Whether a process whose leader reads as a zombie (or exiting) runs on in other threads:
    ``/proc/<pid>/task`` lists a thread beside the leader. False once it is gone."""
    tids = _threads(pid, 2)
    return tids is not None and len(tids) > 1


# signal(7), as Linux numbers them: the signals whose default action neither terminates nor dumps
# core (ignored: CHLD, CONT, URG, WINCH; stopping: STOP, TSTP, TTIN, TTOU)
_NOT_FATAL_BY_DEFAULT = sum(1 << (number - 1) for number in (17, 18, 23, 28, 19, 20, 21, 22))
_SIGKILL_BIT = 1 << 8
_STATUS_MASKS = (b"SigPnd", b"ShdPnd", b"SigBlk", b"SigIgn", b"SigCgt")


def status_fields(status: bytes, names: tuple[bytes, ...]) -> dict[bytes, bytes]:
    """``/proc/<pid>/status``'s ``name: value`` lines asked for, by name (values unstripped; a line
    the kernel does not show is left out). Each is found, not every line split: the caller's
    ``umask_now`` reads one this way on every call without the C module."""
    text = b"\n" + status
    found = {}
    for name in names:
        at = text.find(b"\n" + name + b":")
        if at >= 0:
            start = at + len(name) + 2
            end = text.find(b"\n", start)
            found[name] = text[start : end if end >= 0 else len(text)]
    return found


PF_EXITING = 0x4  # include/linux/sched.h: set as ``do_exit`` begins, never cleared


def exiting(pid: int) -> bool:
    """Whether the process has begun its exit (``PF_EXITING`` in its ``/proc/<pid>/stat`` flags:
    from then on it leaves its groups' lists and its v1 groups read as ``/``), is a zombie (a
    leader whose main thread alone ended too), or is gone; a stat that cannot be read is taken
    for one on its way out (the callers' safe side)."""
    try:
        _, fields = read_stat(pid)
        return bool(int(fields[6]) & PF_EXITING) or fields[0] in (b"Z", b"X")
    except (OSError, IndexError, ValueError):
        return True


_THREADS_LOOKED_AT = 32  # of a zombie leader's threads, looked at for their exit (``_others_exiting``)


def _others_exiting(pid: int) -> bool:
    """Whether no thread beside the leader of a process whose leader reads as a zombie or has
    begun its exit (``PF_EXITING``) runs on: none is left (or the process is gone), or every one
    has begun its exit too (its last one freeing a large memory, say): the process is on its way
    out. One task list read. A thread whose stat cannot be read, or is gone, counts as exiting
    (``exiting``'s safe side); more than a few dozen threads are not claimed."""
    tids = _threads(pid, _THREADS_LOOKED_AT + 1)
    if tids is None or len(tids) <= 1:
        return True
    return len(tids) <= _THREADS_LOOKED_AT and all(exiting(tid) for tid in tids if tid != pid)


def process_of(tid: int) -> int | None:
    """The process a thread is of (its ``Tgid``), or None once it is gone."""
    try:
        return int(status_fields(read_bytes(f"/proc/{tid}/status"), (b"Tgid",))[b"Tgid"])
    except (OSError, KeyError, ValueError):
        return None


def dying(pid: int) -> bool:
    """True when the process is on its way out already: exiting or a zombie (state X, or Z with no
    other thread left: ``read_member``'s zombie), gone,
    or with a signal pending that ends it (SIGKILL, or one neither blocked, ignored nor caught
    whose default action is fatal). A job's command may kill what it started just before it
    exits (``sleep 100 & kill $!``): such a process is not one the command left running."""
    try:
        status = read_bytes(f"/proc/{pid}/status")
    except (FileNotFoundError, ProcessLookupError):
        return True
    except OSError:
        return False
    fields = status_fields(status, (b"State", *_STATUS_MASKS))
    state = fields.get(b"State", b"").strip()[:1]
    # the whole process on its way out: its last thread exiting (PF_EXITING), or each of a
    # zombie leader's others (one may have dropped the run's pipes and still free its memory)
    if state == b"X" or ((state == b"Z" or exiting(pid)) and _others_exiting(pid)):
        return True
    try:
        pending, shared, blocked, ignored, caught = (int(fields[key], 16) for key in _STATUS_MASKS)
    except (KeyError, ValueError):
        return False
    pending |= shared
    return bool(pending & _SIGKILL_BIT or pending & ~(blocked | ignored | caught) & ~_NOT_FATAL_BY_DEFAULT)


class LiveUsage(Plain):
    """What the processes alive at a read point have used: the sum of their resident
    high-water marks (VmHWM; None when no live process has an address space), their CPU with
    that of the children they reaped (ns, at clock-tick precision), and their storage I/O with
    their reaped children's (/proc/<pid>/io; None where unreadable or not read). ``own_cpu_ns``: their own
    CPU only, utime and stime, as the reference sums it (None when no member's stat was read)."""

    __slots__ = ("peak_memory_bytes", "user_ns", "system_ns", "read_bytes", "write_bytes", "own_cpu_ns")

    def __init__(
        self,
        peak_memory_bytes: int | None,
        user_ns: int = 0,
        system_ns: int = 0,
        read_bytes: int | None = 0,
        write_bytes: int | None = 0,
        own_cpu_ns: int | None = None,
    ):
        self.peak_memory_bytes = peak_memory_bytes
        self.user_ns = user_ns
        self.system_ns = system_ns
        self.read_bytes = read_bytes
        self.write_bytes = write_bytes
        self.own_cpu_ns = own_cpu_ns


def usage_of(pids: list[int], io: bool = True) -> LiveUsage:
    """Summed from /proc over the processes still there; a zombie counts for CPU and I/O only.
    ``io`` False: no ``/proc/<pid>/io`` is read (the I/O figures None), for a caller whose
    figures take no live member's I/O (``Container.live_io``)."""
    memory = None
    ticks = [0, 0]
    own: int | None = None  # utime and stime alone
    summed: list[int] | None = [0, 0] if io else None
    for pid in sorted(set(pids)):
        try:
            with open(f"/proc/{pid}/status", "rb") as handle:
                status = handle.read()
            stat_fields = read_stat(pid)[1]
        except OSError:
            continue  # gone (or unreadable) between the listing and the read
        hwm = next((line.split()[1] for line in status.splitlines() if line.startswith(b"VmHWM:")), None)
        if hwm is not None:  # a zombie or a kernel thread has no address space to measure
            memory = (memory or 0) + int(hwm) * 1024
        # utime and cutime, stime and cstime (``split_stat``)
        ticks[0] += int(stat_fields[11]) + int(stat_fields[13])
        ticks[1] += int(stat_fields[12]) + int(stat_fields[14])
        own = (own or 0) + int(stat_fields[11]) + int(stat_fields[12])
        if summed is not None:
            counters = _io_counters(pid)
            summed = None if counters is None else [summed[0] + counters[0], summed[1] + counters[1]]
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    read, written = summed if summed is not None else (None, None)
    own_ns = own * tick_ns if own is not None else None
    return LiveUsage(memory, ticks[0] * tick_ns, ticks[1] * tick_ns, read, written, own_ns)


def _io_counters(pid: int) -> tuple[int, int] | None:
    """``read_bytes`` and ``write_bytes`` less ``cancelled_write_bytes`` (rusage's own account)."""
    try:
        with open(f"/proc/{pid}/io", "rb") as handle:
            fields = dict(line.split(b": ", 1) for line in handle.read().splitlines() if b": " in line)
    except FileNotFoundError:
        return 0, 0  # gone meanwhile: what it did is in its parent's figures by now
    except OSError:
        return None
    written = int(fields.get(b"write_bytes", 0)) - int(fields.get(b"cancelled_write_bytes", 0))
    return int(fields.get(b"read_bytes", 0)), max(written, 0)


def read_members(pids: list[int]) -> list[Member]:
    members = (read_member(pid) for pid in sorted(set(pids)))
    return [m for m in members if m is not None]


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]
