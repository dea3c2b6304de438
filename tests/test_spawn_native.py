"""The native spawn's C child, driven in-process through ``spawn_native.Pending``, each waited for.

The child shares the runner's memory until its execve (csrc/spawn.c), so what it may not do
is checked where it would show: each step's failure comes back with its own stage and errno;
a signal sent while the child is being set up is neither run by the runner's handler in the
child nor lost for the runner; concurrent spawns each get a stack of their own.
"""

from __future__ import annotations

import errno
import fcntl
import os
import resource
import signal
import subprocess
import sys
import threading
import time

import pytest

from processkit.containment.base import ChildJoins

from test_limits import own_cgroup_dirs
from conftest import SAFETY_NET, full_pipe

native = pytest.importorskip("processkit._native")
spawn_native = pytest.importorskip("processkit.engine.spawn_native")
lib = native.lib

ENV = {"PATH": "/usr/bin:/bin"}


def attempt(argv=("true",), *, cwd=None, joins=None, stdio=(-1, -1, -1), terminal=False):
    """(stage, errno) of a spawn; a started child is reaped and must have exited 0."""
    result = spawn_native.Pending(
        list(argv), ENV, cwd, joins or ChildJoins(), list(stdio), terminal, 0, False, passed=()
    ).wait()
    if result.stage == lib.PK_SPAWN_OK:
        if result.pidfd >= 0:
            os.close(result.pidfd)
        assert os.waitstatus_to_exitcode(os.waitpid(result.pid, 0)[1]) == 0
    return result.stage, result.error


def read_only_fd(tmp_path) -> int:
    """An fd a write to fails with EBADF: a "cgroup.procs" the child cannot join through."""
    (tmp_path / "procs").write_text("")
    return os.open(tmp_path / "procs", os.O_RDONLY | os.O_CLOEXEC)


def closed_fd() -> int:
    """The highest fd the limit allows, which nothing here opens (a freed low number would be
    taken again by the spawn's own report pipe)."""
    fd = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 1
    with pytest.raises(OSError):
        os.fstat(fd)
    return fd


def test_a_program_that_starts_reports_no_failure(tmp_path):
    assert attempt() == (lib.PK_SPAWN_OK, 0)


def test_a_failed_join_is_the_join_stage_with_its_errno(tmp_path):
    fd = read_only_fd(tmp_path)
    try:
        assert attempt(joins=ChildJoins(procs_fds=(fd,))) == (lib.PK_SPAWN_JOIN, errno.EBADF)
        assert attempt(joins=ChildJoins(cgroup_procs_fd=fd)) == (lib.PK_SPAWN_JOIN, errno.EBADF)
    finally:
        os.close(fd)


def test_a_group_that_cannot_be_cloned_into_is_joined_by_write(tmp_path):
    """A directory that is no cgroup: clone3 refuses it, the child is cloned outside and must
    then write itself into the group's cgroup.procs (here: fail to, and say so)."""
    directory = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fd = read_only_fd(tmp_path)
    try:
        joins = ChildJoins(cgroup_dir_fd=directory, cgroup_procs_fd=fd)
        assert attempt(joins=joins) == (lib.PK_SPAWN_JOIN, errno.EBADF)
        assert attempt(joins=ChildJoins(cgroup_dir_fd=directory)) == (lib.PK_SPAWN_OK, 0)
    finally:
        os.close(directory)
        os.close(fd)


def test_a_bad_stdio_fd_is_the_stdio_stage(tmp_path):
    assert attempt(stdio=(closed_fd(), -1, -1)) == (lib.PK_SPAWN_STDIO, errno.EBADF)


def test_a_terminal_that_is_not_one_is_the_stdio_stage(tmp_path):
    read_end, write_end = os.pipe()
    try:
        got = attempt(stdio=(read_end, write_end, write_end), terminal=True)
        assert got == (lib.PK_SPAWN_STDIO, errno.ENOTTY)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_bad_cwd_is_the_chdir_stage(tmp_path):
    (tmp_path / "file").write_text("")
    assert attempt(cwd=str(tmp_path / "missing")) == (lib.PK_SPAWN_CHDIR, errno.ENOENT)
    assert attempt(cwd=str(tmp_path / "file")) == (lib.PK_SPAWN_CHDIR, errno.ENOTDIR)


def test_exec_failures_are_the_exec_stage_with_the_first_telling_errno(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x01\x02 no interpreter line, no ELF\n")
    garbage.chmod(0o755)
    assert attempt([str(tmp_path / "missing")]) == (lib.PK_SPAWN_EXEC, errno.ENOENT)
    assert attempt([str(plain)]) == (lib.PK_SPAWN_EXEC, errno.EACCES)
    assert attempt([str(garbage)]) == (lib.PK_SPAWN_EXEC, errno.ENOEXEC)
    ENV["PATH"] = f"{tmp_path / 'missing'}:{tmp_path}:{tmp_path / 'also-missing'}"
    try:
        assert attempt(["plain"]) == (lib.PK_SPAWN_EXEC, errno.EACCES)
    finally:
        ENV["PATH"] = "/usr/bin:/bin"


def stalled_join():
    """A join fd whose write blocks (a full pipe) until ``release`` reads from it: the child
    waits there, before its signal reset, for as long as the test needs."""
    read_end, write_end = full_pipe()

    def release() -> None:
        os.read(read_end, 1 << 20)

    return read_end, write_end, release


def wait_for_child(parent_tid: int) -> int:
    """The pid of the thread's one child once it is blocked in its join (state S)."""
    deadline = time.monotonic() + SAFETY_NET
    children = f"/proc/{os.getpid()}/task/{parent_tid}/children"
    while time.monotonic() < deadline:
        pids = open(children).read().split()
        if pids:
            with open(f"/proc/{pids[0]}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "S":
                    return int(pids[0])
        time.sleep(0.001)
    raise AssertionError("the child never blocked in its join")


def isolated(scenario) -> None:
    """Runs a threaded scenario in a fresh interpreter: its signal handlers stay out of the
    test process, and a broken child (a stack run on twice) fails it instead of hanging it."""
    code = f"import test_spawn_native as t; t.{scenario.__name__}()"
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", code], cwd=here, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()


def signal_during_spawn() -> None:
    caught: list[int] = []
    for signum in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, lambda s, _f: caught.append(s))
    read_end, write_end, release = stalled_join()
    main = threading.get_ident()
    sent = []

    def interfere() -> None:
        child = wait_for_child(threading.main_thread().native_id)
        os.kill(child, signal.SIGUSR1)
        signal.pthread_kill(main, signal.SIGUSR2)
        sent.append(child)
        release()

    helper = threading.Thread(target=interfere)
    helper.start()
    result = spawn_native.Pending(
        ["true"], ENV, None, ChildJoins(procs_fds=(write_end,)), [-1, -1, -1], False, 0, False, passed=()
    ).wait()
    helper.join()
    assert result.stage == lib.PK_SPAWN_OK  # killed after its last report, so "started"
    assert [result.pid] == sent
    assert os.waitstatus_to_exitcode(os.waitpid(result.pid, 0)[1]) == -signal.SIGUSR1
    signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a call that runs pending handlers
    assert caught == [signal.SIGUSR2]


def test_the_copy_on_write_childs_own_readings_reach_the_runner(tmp_path):
    """A capped run's child (own_memory: the copy-on-write one) writes its first step's clock
    reading and its joining time where the runner reads them (bench times the command from them),
    not into its own copy of the memory, which left the runner's reading before the clone."""
    procs = os.open(tmp_path / "procs", os.O_WRONLY | os.O_CREAT, 0o600)  # a join by write lands here
    try:
        before = time.monotonic_ns()
        joins = ChildJoins(procs_fds=(procs,))
        result = spawn_native.Pending(
            ["true"], ENV, None, joins, [-1, -1, -1], False, 0, own_memory=True, passed=()
        ).wait()
    finally:
        os.close(procs)
    assert result.stage == lib.PK_SPAWN_OK
    os.waitpid(result.pid, 0)
    assert (tmp_path / "procs").read_bytes() == b"0"
    assert result.join_ns > 0 and result.start_ns > before


def clone_refused() -> None:
    """In a pids group that holds this process and allows nothing more: every clone refused."""
    with open(os.path.join(os.environ["PK_TEST_PIDS_GROUP"], "cgroup.procs"), "w") as handle:
        handle.write("0")
    for own_memory in (False, True):
        result = spawn_native.Pending(
            ["true"], ENV, None, ChildJoins(), [-1, -1, -1], False, 0, own_memory=own_memory, passed=()
        ).wait()
        assert (result.stage, result.error) == (lib.PK_SPAWN_CLONE, errno.EAGAIN), own_memory
        assert (result.pid, result.start_ns, result.join_ns) == (-1, 0, 0), own_memory


def test_a_refused_clone_reports_no_start_time(monkeypatch):
    """spawn.h: start_ns is 0 on failure, never the runner's reading from before the clone (a
    caller would time a command that never ran from it)."""
    pids = own_cgroup_dirs().get("pids")
    if os.geteuid() != 0 or pids is None or not os.access(pids, os.W_OK):
        pytest.skip("needs root and a writable cgroup v1 pids hierarchy")
    group = os.path.join(pids, f"pk-test-clone-refused-{os.getpid()}")
    os.mkdir(group)
    try:
        with open(os.path.join(group, "pids.max"), "w") as handle:
            handle.write("1")
        monkeypatch.setenv("PK_TEST_PIDS_GROUP", group)
        isolated(clone_refused)
    finally:
        os.rmdir(group)  # its one member, the isolated interpreter, has exited


def test_a_signal_during_the_spawn_is_not_run_in_the_child_nor_lost():
    """While the child is stalled before exec, the runner's thread gets SIGUSR2 and the child
    SIGUSR1, both caught by Python handlers in the runner. The runner must handle SIGUSR2 once,
    after the spawn; the child must die of SIGUSR1 at its default action, never running the
    runner's handler (which, in a child sharing the memory, would trip the runner's flag)."""
    isolated(signal_during_spawn)


def concurrent_spawns() -> None:
    read_end, write_end, release = stalled_join()
    results = []

    def stalled() -> None:
        """Reaps its child itself: the parent-death signal follows the spawning thread's end."""
        joins = ChildJoins(procs_fds=(write_end,))
        result = spawn_native.Pending(["true"], ENV, None, joins, [-1, -1, -1], False, 0, False, passed=()).wait()
        results.append((result.stage, result.error, os.waitstatus_to_exitcode(os.waitpid(result.pid, 0)[1])))

    helper = threading.Thread(target=stalled)
    helper.start()
    wait_for_child(helper.native_id)
    for _ in range(20):
        assert attempt(["true"]) == (lib.PK_SPAWN_OK, 0)
    release()
    helper.join()
    assert results == [(lib.PK_SPAWN_OK, 0, 0)]


def test_concurrent_spawns_use_stacks_of_their_own():
    """One thread's child stalls in its join while the main thread spawns many others: a
    stack handed out twice would be run on by two children at once."""
    isolated(concurrent_spawns)


def test_the_runners_fds_and_memory_are_untouched_by_the_child(tmp_path):
    """The child dup2s, closes every other fd and changes directory: in its own fd table and
    process, not the runner's, even while sharing the memory."""
    here = os.getcwd()
    read_end, write_end = os.pipe()
    flags = fcntl.fcntl(write_end, fcntl.F_GETFD)
    try:
        (tmp_path / "sub").mkdir()
        assert attempt(cwd=str(tmp_path / "sub"), stdio=(-1, write_end, -1)) == (lib.PK_SPAWN_OK, 0)
        assert os.getcwd() == here
        assert fcntl.fcntl(write_end, fcntl.F_GETFD) == flags
        os.write(write_end, b"still open")
        assert os.read(read_end, 100) == b"still open"
    finally:
        os.close(read_end)
        os.close(write_end)


def dispositions_after_spawn() -> None:
    """A runner that catches SIGUSR1 and SIGTERM, ignores SIGUSR2 and SIGHUP (Python ignores
    SIGPIPE and SIGXFSZ) and blocks SIGINT and SIGQUIT: its child's /proc status shows every
    caught one at its default, SIGPIPE and SIGXFSZ at their defaults, SIGUSR2 and SIGHUP still
    ignored, and an empty mask."""
    for signum in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(signum, lambda _s, _f: None)
    for signum in (signal.SIGUSR2, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGQUIT})
    read_end, write_end = os.pipe()
    result = spawn_native.Pending(
        ["cat", "/proc/self/status"], ENV, None, ChildJoins(), [-1, write_end, -1], False, 0, False, passed=()
    ).wait()
    os.close(write_end)
    with os.fdopen(read_end, "rb") as out:
        status = out.read().decode()
    assert os.waitstatus_to_exitcode(os.waitpid(result.pid, 0)[1]) == 0
    fields = dict(line.split(":", 1) for line in status.splitlines())
    masks = {name: int(fields[name], 16) for name in ("SigBlk", "SigIgn", "SigCgt")}
    ignored = {signum for signum in range(1, signal.NSIG) if masks["SigIgn"] & (1 << (signum - 1))}
    assert masks["SigBlk"] == 0 and masks["SigCgt"] == 0
    assert {signal.SIGUSR2, signal.SIGHUP} <= ignored
    assert not ignored & {signal.SIGUSR1, signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT}


def test_the_child_gets_default_dispositions_but_keeps_ignored_signals_and_an_empty_mask():
    isolated(dispositions_after_spawn)


def signal_during_spawn_without_clone3() -> None:
    """signal_during_spawn where clone3 fails ENOSYS (a seccomp filter on this process, as
    container runtimes install): the child comes from glibc's clone(), which cannot ask the
    kernel to reset the caught handlers (CLONE_CLEAR_SIGHAND is clone3's), so it must reset
    them itself before it unblocks SIGUSR1."""
    import ctypes
    import struct

    ld, jeq, ret = 0x20, 0x15, 0x06
    program = [
        (ld, 0, 0, 4),  # the architecture
        (jeq, 0, 3, 0xC000003E),  # x86-64, else allow
        (ld, 0, 0, 0),  # the system call's number
        (jeq, 0, 1, 435),  # clone3
        (ret, 0, 0, 0x00050000 | errno.ENOSYS),
        (ret, 0, 0, 0x7FFF0000),
    ]
    filters = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in program))
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(filters))
    assert libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) == 0, os.strerror(ctypes.get_errno())
    signal_during_spawn()


def test_a_signal_during_the_spawn_is_not_run_in_the_child_of_the_fallback_clone():
    if os.uname().machine != "x86_64":
        pytest.skip("the filter here is written for x86-64's system call numbers")
    isolated(signal_during_spawn_without_clone3)


def test_a_directory_the_path_repeats_is_tried_once_and_the_last_stays_last():
    """The candidates the C child execs in turn: no second failing execve in one directory."""
    env = {"PATH": "/a:/b:/a::/b"}
    assert spawn_native._exec_paths(b"prog", env) == [b"/a/prog", b"/b/prog", b"prog", b"/b/prog"]
    assert spawn_native._exec_paths(b"./prog", env) == [b"./prog"]


def output_of(argv, env) -> bytes:
    """What the child (which must exit 0) wrote to its stdout, through a pipe."""
    read_end, write_end = os.pipe()
    try:
        result = spawn_native.Pending(
            list(argv), env, None, ChildJoins(), [-1, write_end, -1], False, 0, False, passed=()
        ).wait()
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        data = reader.read()
    assert result.stage == lib.PK_SPAWN_OK
    if result.pidfd >= 0:
        os.close(result.pidfd)
    assert os.waitstatus_to_exitcode(os.waitpid(result.pid, 0)[1]) == 0
    return data


def test_each_spawn_passes_its_own_environment_in_its_own_order():
    """The envp kept from the last spawn is passed again only for an equal mapping in the same
    order: a changed value, a new key, or the same entries reordered reach the next child."""
    cat = ["cat", "/proc/self/environ"]
    first = {"PATH": "/usr/bin:/bin", "A": "1", "B": "2"}
    assert output_of(cat, first) == b"PATH=/usr/bin:/bin\0A=1\0B=2\0"
    assert output_of(cat, dict(first)) == b"PATH=/usr/bin:/bin\0A=1\0B=2\0"
    assert output_of(cat, {**first, "A": "changed"}) == b"PATH=/usr/bin:/bin\0A=changed\0B=2\0"
    assert output_of(cat, {**first, "C": "3"}) == b"PATH=/usr/bin:/bin\0A=1\0B=2\0C=3\0"
    reordered = {"B": "2", "A": "1", "PATH": "/usr/bin:/bin"}
    assert reordered == first
    assert output_of(cat, reordered) == b"B=2\0A=1\0PATH=/usr/bin:/bin\0"
    mutated = dict(first)
    assert output_of(cat, mutated) == b"PATH=/usr/bin:/bin\0A=1\0B=2\0"
    mutated["A"] = "after"  # the caller's mapping changed in place since its spawn
    assert output_of(cat, mutated) == b"PATH=/usr/bin:/bin\0A=after\0B=2\0"


def test_each_spawn_searches_its_own_path_and_passes_its_own_argv(tmp_path):
    """The argv and exec candidates kept from the last spawn follow the argv and the PATH, and
    the same request again searches the PATH again."""
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        script = tmp_path / name / "pk-which"
        script.write_text(f'#!/bin/sh\necho "{name} $*"\n')
        script.chmod(0o755)
    both = {"PATH": f"{tmp_path / 'one'}:{tmp_path / 'two'}:/usr/bin:/bin"}
    assert output_of(["pk-which", "a"], both) == b"one a\n"
    (tmp_path / "one" / "pk-which").unlink()
    assert output_of(["pk-which", "a"], both) == b"two a\n"
    assert output_of(["pk-which", "b"], both) == b"two b\n"
    (tmp_path / "one" / "pk-which").write_text('#!/bin/sh\necho "new $*"\n')
    (tmp_path / "one" / "pk-which").chmod(0o755)
    assert output_of(["pk-which", "b"], both) == b"new b\n"
    assert output_of(["pk-which", "b"], {"PATH": f"{tmp_path / 'two'}:/usr/bin:/bin"}) == b"two b\n"


def report_pipe_that_cannot_move() -> None:
    """A runner with its std fds closed gets its report pipe at 0 and 1; the child moves it
    above 2, and here no fd is free there under the limit. The child must still report that
    failure through the pipe where it is, not exit 127 in silence (read as "started")."""
    saved = os.dup(2)
    for fd in (0, 1, 2):
        os.close(fd)
    held = [int(name) for name in os.listdir("/proc/self/fd")]
    top = max(held)
    filler = [os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC) for _ in range(top - 2 - len(set(held) - {0, 1, 2}))]
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (top + 1, limits[1]))
    try:
        result = spawn_native.Pending(
            ["true"], ENV, None, ChildJoins(), [-1, -1, -1], False, 0, False, passed=()
        ).wait()
        got = (result.stage, result.error)
        if result.stage == lib.PK_SPAWN_OK:
            got += (os.waitstatus_to_exitcode(os.waitpid(result.pid, 0)[1]),)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
        os.dup2(saved, 2)
        for fd in filler:
            os.close(fd)
    assert got == (lib.PK_SPAWN_STDIO, errno.EMFILE), got


def test_a_report_pipe_that_cannot_move_still_reports():
    isolated(report_pipe_that_cannot_move)


def without_close_range(kill_closing_from: int) -> None:
    """A seccomp filter on this process (and the children it spawns): ``close_range`` fails
    ENOSYS, as under container runtimes' filters and kernels before 5.9, and a ``close`` of an
    fd at or above ``kill_closing_from`` kills the caller (SIGSYS)."""
    import ctypes
    import struct

    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, kill, enosys = 0x7FFF0000, 0x80000000, 0x00050000 | errno.ENOSYS
    program = [
        (ld, 0, 0, 4),  # the architecture
        (jeq, 0, 7, 0xC000003E),  # x86-64, else allow
        (ld, 0, 0, 0),  # the system call's number
        (jeq, 0, 1, 436),  # close_range
        (ret, 0, 0, enosys),
        (jeq, 0, 3, 3),  # close
        (ld, 0, 0, 16),  # its fd
        (jge, 0, 1, kill_closing_from),
        (ret, 0, 0, kill),
        (ret, 0, 0, allow),
    ]
    filters = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in program))
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(filters))
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    assert libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) == 0, os.strerror(ctypes.get_errno())  # a filter
    without_close_range.kept = filters  # type: ignore[attr-defined]


def spawn_without_close_range() -> None:
    """Where close_range fails the child closes the fds it has, listed in /proc/self/fd, not
    every number up to the soft limit (a million calls under a batch's raised limit, while
    CLONE_VFORK holds the runner): here a close of any fd from 10,000 up kills it."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (20_000, max(20_000, resource.getrlimit(resource.RLIMIT_NOFILE)[1])))
    inherited = os.dup2(0, 500)  # inheritable, yet closed in the child: only 0-2 and the passed pass
    passed = os.dup2(0, 400)  # a caller's descriptor the child keeps (caller_fds.py)
    without_close_range(10_000)
    read_end, write_end = os.pipe()
    result = spawn_native.Pending(
        ["ls", "/proc/self/fd"], ENV, None, ChildJoins(), [-1, write_end, -1], False, 0, False, (passed,)
    ).wait()
    os.close(write_end)
    with os.fdopen(read_end, "rb") as out:
        listed = out.read().split()
    assert result.stage == lib.PK_SPAWN_OK, (result.stage, result.error)
    assert os.waitstatus_to_exitcode(os.waitpid(result.pid, 0)[1]) == 0
    assert str(inherited).encode() not in listed and b"1" in listed, listed
    assert str(passed).encode() in listed, listed


def test_without_close_range_the_child_closes_only_the_fds_it_has():
    if os.uname().machine != "x86_64":
        pytest.skip("the filter here is written for x86-64's system call numbers")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
        if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 20_000 and os.geteuid() != 0:
            pytest.skip("needs an open-file limit of 20,000")
    except (ValueError, OSError):
        pytest.skip("cannot set the open-file limit")
    isolated(spawn_without_close_range)


def test_a_build_with_the_copy_on_write_child_spawns_through_popen_unless_asked(monkeypatch):
    """A build for another architecture than x86-64 has the copy-on-write child (its clone3 is
    no assembly of ours), which no CI run there has tried: it spawns through Popen by default,
    and through that child only when ``PROCESSKIT_SPAWN=native`` asks. Forced here by a module
    whose ``pk_spawn_shared_memory()`` says 0, as such a build's does."""

    class CopyOnWrite:
        @staticmethod
        def pk_spawn_shared_memory() -> int:
            return 0

    from processkit.engine import spawn

    built = type("Built", (), {"lib": CopyOnWrite()})()
    monkeypatch.setattr(spawn.native, "module", lambda: built)
    monkeypatch.delenv("PROCESSKIT_SPAWN", raising=False)
    assert spawn.select_backend() == "python"
    monkeypatch.setenv("PROCESSKIT_SPAWN", "native")
    assert spawn.select_backend() == "native"
    monkeypatch.setattr(spawn.native, "module", lambda: native)
    monkeypatch.delenv("PROCESSKIT_SPAWN")
    assert spawn.select_backend() == ("native" if lib.pk_spawn_shared_memory() else "python")
