"""A fork() elsewhere in the spawning process while the native spawn clones (another thread of a
Dask worker or an API caller that runs a batch in-process) copies every descriptor the runner
holds then; a copy held by a child that never execs must not hold a run up (csrc/spawn_report.c).
The runner once waited only for the end of file of the report pipe it makes, whose write end
such a copy kept open: the run hung for as long as that forked child lived. The word the kernel
clears in the runner's memory as the child leaves it (its exec or exit) now decides.

The fork is made deterministic by a preloaded shim: at the spawn's "block every signal across
the clone" (``sigprocmask``), the moment the clone is next, it forks a holder that keeps the
descriptors the last ``pipe2`` made (the report pipe's) and nothing else, and waits until the
test kills it.

Each case runs twice: with the shared-memory child, and with the copy-on-write one (which has no
such word: its exec is told by its PF_FORKNOEXEC flag), which a capped run, a build without the
shared-memory child (another architecture, .ci/sanitize's PK_SPAWN_COW) and a kernel before 5.16
take. The
shim makes that kernel: ``uname`` reports the release PK_TEST_KERNEL names."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAFETY_NET

pytest.importorskip("processkit._native")
pytestmark = [
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc for the preloaded shim"),
    pytest.mark.skipif(os.environ.get("PROCESSKIT_SPAWN") == "python", reason="the native spawn's report"),
    pytest.mark.skipif("LD_PRELOAD" in os.environ, reason="a sanitizer's runtime is preloaded already"),
]

SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

static int last[2] = {-1, -1};

int pipe2(int fds[2], int flags)
{
    int (*real)(int *, int) = (int (*)(int *, int))dlsym(RTLD_NEXT, "pipe2");
    int done = real(fds, flags);
    if (done == 0) {
        last[0] = fds[0];
        last[1] = fds[1];
    }
    return done;
}

/* A forked child of the spawning process that keeps the report's descriptors and never execs. */
static void hold(void)
{
    const char *record = getenv("PK_TEST_HOLDERS");
    pid_t pid;
    int fd;
    if (!record || last[0] < 0)
        return;
    pid = fork();
    if (pid == 0) {
        for (fd = 0; fd < 65536; fd++)
            if (fd != last[0] && fd != last[1])
                close(fd);
        for (;;)
            pause();
    }
    if (pid > 0 && (fd = open(record, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) >= 0) {
        dprintf(fd, "%d\n", (int)pid);
        close(fd);
    }
}

int uname(struct utsname *name)
{
    int (*real)(struct utsname *) = (int (*)(struct utsname *))dlsym(RTLD_NEXT, "uname");
    const char *release = getenv("PK_TEST_KERNEL");
    int done = real(name);
    if (done == 0 && release)
        snprintf(name->release, sizeof name->release, "%s", release);
    return done;
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    int (*real)(int, const sigset_t *, sigset_t *) =
        (int (*)(int, const sigset_t *, sigset_t *))dlsym(RTLD_NEXT, "sigprocmask");
    if (how == SIG_BLOCK && set && sigismember(set, SIGTERM) == 1 && sigismember(set, SIGCHLD) == 1 &&
        sigismember(set, SIGHUP) == 1 && sigismember(set, SIGINT) == 1)
        hold(); /* the spawn's block of every signal, right before its clone */
    return real(how, set, old);
}
"""


@pytest.fixture
def shim(tmp_path):
    """The environment that preloads the shim (no holder forked unless PK_TEST_HOLDERS names
    where to record it)."""
    source, built_shim = tmp_path / "hold.c", tmp_path / "hold.so"
    source.write_text(SHIM)
    built = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-o", str(built_shim), str(source), "-ldl"], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    return dict(os.environ, LD_PRELOAD=str(built_shim), PROCESSKIT_SPAWN="native")


@pytest.fixture(params=["shared", "copy-on-write"])
def holding(request, shim, tmp_path):
    """The shim's environment forking holders, with either child (the copy-on-write one where the
    kernel is made older than 5.16); every holder it forked is killed after the test."""
    record = tmp_path / "holders"
    env = dict(shim, PK_TEST_HOLDERS=str(record))
    if request.param == "copy-on-write":
        env["PK_TEST_KERNEL"] = "5.15.0"
    elif not _shared_memory(shim):
        pytest.skip("this build has no shared-memory child")
    yield env, record
    for line in record.read_text().split() if record.exists() else []:
        try:
            os.kill(int(line), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _shared_memory(env) -> bool:
    """What ``pk_spawn_shared_memory`` says in a process of this environment."""
    script = "from processkit import native; print(native.module().lib.pk_spawn_shared_memory())"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, check=True)
    return done.stdout == b"1\n"


def test_the_shared_memory_child_is_taken_only_from_linux_5_16(shim):
    """Before 5.16 a child dying of a core-dumping signal killed every process sharing its memory
    (the runner): there the copy-on-write child is taken, and the default spawn is Popen's."""
    if not _shared_memory(shim):
        pytest.skip("this build has no shared-memory child")
    assert not _shared_memory(dict(shim, PK_TEST_KERNEL="5.15.0"))
    assert not _shared_memory(dict(shim, PK_TEST_KERNEL="4.19.0-26-amd64"))
    assert _shared_memory(dict(shim, PK_TEST_KERNEL="5.16.0"))
    assert _shared_memory(dict(shim, PK_TEST_KERNEL="6.1.0-rc2"))
    script = "from processkit.engine import spawn; print(spawn.select_backend())"
    env = {key: value for key, value in shim.items() if key != "PROCESSKIT_SPAWN"}
    done = subprocess.run([sys.executable, "-c", script], env=dict(env, PK_TEST_KERNEL="5.15.0"), capture_output=True)
    assert done.stdout == b"python\n", done.stderr


def _cli(env, cwd, *args) -> subprocess.CompletedProcess:
    cli = Path(sys.executable).with_name("processkit-cli")
    # A bound on a failure, not a timing: the held end of file held the run for good.
    return subprocess.run(
        [str(cli), *args], env=env, cwd=cwd, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )


def test_a_run_completes_while_a_fork_holds_its_reports_descriptors(holding, tmp_path):
    """The CLI's single run, which waits for its exec in the spawn itself."""
    env, record = holding
    done = _cli(env, tmp_path, "run", "--jsonl", str(tmp_path / "run.jsonl"), "--", "sh", "-c", "echo ran")
    assert record.exists(), "the shim forked no holder: the test would prove nothing"
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"ran\n"


def test_a_failed_exec_is_reported_while_a_fork_holds_its_reports_descriptors(holding, tmp_path):
    env, record = holding
    done = _cli(env, tmp_path, "run", "--jsonl", str(tmp_path / "run.jsonl"), "--", str(tmp_path / "absent"))
    assert record.exists()
    assert done.returncode == 101, done.stderr
    assert f"`{tmp_path / 'absent'}` not found".encode() in done.stderr  # the exec's ENOENT, reported


def test_a_batch_completes_while_forks_hold_its_jobs_reports_descriptors(holding, tmp_path):
    """A batch's host carries several jobs and waits for each exec on its loop."""
    env, record = holding
    manifest = tmp_path / "jobs.jsonl"
    jobs = [{"args": ["sh", "-c", f"echo {n}"], "id": f"j{n}"} for n in range(4)]
    jobs.append({"args": [str(tmp_path / "absent")], "id": "missing"})
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    done = _cli(env, tmp_path, "batch", str(manifest), "--out", str(tmp_path / "out"), "--jobs", "2")
    assert len(record.read_text().split()) == len(jobs), "a holder for each job's spawn"
    lines = {
        line["id"]: line for line in map(json.loads, (tmp_path / "out" / "summary.jsonl").read_text().splitlines())
    }
    assert set(lines) == {job["id"] for job in jobs}, done.stderr
    assert all(lines[f"j{n}"]["exit_code"] == 0 for n in range(4)), lines
    assert lines["missing"]["exit_code"] == 101, lines["missing"]


FIRST_LOOK_EARLY = """
import sys
from processkit.engine import spawn_native
from processkit.cli.main import main

ready, looked = spawn_native.Pending.ready, set()

def first_look_early(self):  # the runner's first look comes before the child's exec
    if id(self) in looked:
        return ready(self)
    looked.add(id(self))
    return False

spawn_native.Pending.ready = first_look_early
sys.exit(main(sys.argv[1:]))
"""


def test_a_batch_job_whose_first_look_comes_early_starts_while_a_fork_holds_its_report(holding, tmp_path):
    """The look every PK_SPAWN_HELD_POLL_MS finds the exec while a fork elsewhere holds the
    report's end of file: a job that fills its output pipe before it exits is started and read,
    not left waiting for its own exit (which it never reaches) or the holder's."""
    env, record = holding
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"args": ["head", "-c", "300000", "/dev/zero"], "id": "big"}) + "\n")
    argv = [sys.executable, "-c", FIRST_LOOK_EARLY, "batch", str(manifest), "--out", str(tmp_path / "out")]
    # A bound on a failure, not a timing: the job otherwise waited for the holder for good.
    done = subprocess.run(
        argv, env=env, cwd=tmp_path, capture_output=True, timeout=SAFETY_NET, stdin=subprocess.DEVNULL
    )
    assert record.exists(), "the shim forked no holder: the test would prove nothing"
    assert done.returncode == 0, done.stderr
    line = json.loads((tmp_path / "out" / "summary.jsonl").read_text())
    assert line["exit_code"] == 0, line


KILLED_AT_BIRTH = r"""
import ctypes, os, struct
from processkit.containment.base import ChildJoins
from processkit.engine import spawn_native

# A seccomp filter (inherited by the child) that kills whoever calls setpgid: the child, at its
# first step after giving the CPU back; this process calls none.
ld, jeq, ret = 0x20, 0x15, 0x06
program = [(ld, 0, 0, 4), (jeq, 0, 3, 0xC000003E), (ld, 0, 0, 0), (jeq, 0, 1, 109), (ret, 0, 0, 0x80000000), (ret, 0, 0, 0x7FFF0000)]
filters = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in program))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.c_char_p(struct.pack("HxxxxxxP", len(program), ctypes.addressof(filters))), 0, 0) == 0
result = spawn_native.Pending(["true"], {"PATH": "/usr/bin:/bin"}, None, ChildJoins(), [-1, -1, -1], False, 0, False, passed=()).wait()
print(result.stage, os.waitstatus_to_exitcode(os.waitpid(result.pid, 0)[1]) if result.stage == 0 else result.error)
"""


def test_a_child_killed_before_its_exec_is_decided_by_its_exit(holding, tmp_path):
    """The report's end of file is held off by the fork's copy, and the child dies (SIGSYS, a
    core dump's signal) before its exec: the spawn ends on its exit (its pidfd, and for the
    shared-memory child its word too, which the kernel clears at a core dump's exit as at any),
    the child reported as started (no report came) and its exit as its own, as a child killed
    after its exec would be. The copy-on-write child's flag says it never exec'd."""
    assert _killed_at_birth(holding, tmp_path, KILLED_AT_BIRTH) == [b"0", str(-signal.SIGSYS).encode()]


def _killed_at_birth(holding, tmp_path, script: str) -> list[bytes]:
    """What ``script`` prints, run where the shim forks its holder."""
    env, record = holding
    if os.uname().machine != "x86_64":
        pytest.skip("the filter names x86-64's system call numbers")
    # A bound on a failure, not a timing: the held end of file held the spawn for good.
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, timeout=SAFETY_NET
    )
    assert record.exists()
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


# KILLED_AT_BIRTH where the kernel gives no pidfd: clone3 refused (ENOSYS) and clone's
# CLONE_PIDFD (EINVAL), so the spawn falls back to a clone without one.
KILLED_AT_BIRTH_NO_PIDFD = r"""
import ctypes, os, struct
from processkit.containment.base import ChildJoins
from processkit.engine import spawn_native

ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
allow, kill, refuse = 0x7FFF0000, 0x00000000, 0x00050000  # SECCOMP_RET_ERRNO with the errno below
program = [
    (ld, 0, 0, 4), (jeq, 0, 9, 0xC000003E), (ld, 0, 0, 0),
    (jeq, 0, 1, 109), (ret, 0, 0, kill),  # setpgid: the child's first step
    (jeq, 0, 1, 435), (ret, 0, 0, refuse | 38),  # clone3: ENOSYS
    (jeq, 0, 3, 56), (ld, 0, 0, 16), (jset, 0, 1, 0x1000), (ret, 0, 0, refuse | 22),  # clone with CLONE_PIDFD: EINVAL
    (ret, 0, 0, allow),
]
filters = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in program))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.c_char_p(struct.pack("HxxxxxxP", len(program), ctypes.addressof(filters))), 0, 0) == 0
result = spawn_native.Pending(["true"], {"PATH": "/usr/bin:/bin"}, None, ChildJoins(), [-1, -1, -1], False, 0, False, passed=()).wait()
print(result.stage, result.pidfd, os.waitstatus_to_exitcode(os.waitpid(result.pid, 0)[1]) if result.stage == 0 else result.error)
"""


def test_a_child_killed_before_its_exec_is_decided_by_its_exit_without_a_pidfd(holding, tmp_path):
    """As above where the kernel gives no pidfd: the wait asks waitid (WNOWAIT, so the child is
    still its run's to reap) whether the child is gone."""
    printed = _killed_at_birth(holding, tmp_path, KILLED_AT_BIRTH_NO_PIDFD)
    assert printed == [b"0", b"-1", str(-signal.SIGSYS).encode()]


# The clone without a pidfd of KILLED_AT_BIRTH_NO_PIDFD, its child let be: it execs a program
# that outlives the spawn (an exit would be seen by waitid), killed once the spawn has returned.
EXECS_WITHOUT_CLONE3 = (
    KILLED_AT_BIRTH_NO_PIDFD.replace("(jeq, 0, 1, 109), (ret, 0, 0, kill),", "(jeq, 0, 1, 109), (ret, 0, 0, allow),")
    .replace(
        'result = spawn_native.Pending(["true"]',
        'result = spawn_native.Pending(["sleep", "60"]',
    )
    .replace("print(result.stage, result.pidfd,", "os.kill(result.pid, 9)\nprint(result.stage, result.pidfd,")
)


def test_the_exec_of_a_child_of_the_fallback_clone_is_seen_while_a_fork_holds_its_report(holding, tmp_path):
    """Without clone3 the child comes from glibc's clone(), which must ask the kernel for the
    same word (CLONE_CHILD_CLEARTID): with the report's end of file held, no pidfd and a child
    that lives on after its exec, the word is all that tells the exec (the spawn otherwise
    waited for the holder, or for the child's end, for good)."""
    assert EXECS_WITHOUT_CLONE3.count("allow),") == 2 and "sleep" in EXECS_WITHOUT_CLONE3
    assert _killed_at_birth(holding, tmp_path, EXECS_WITHOUT_CLONE3) == [b"0", b"-1", b"-9"]
