"""The native spawn's clone3 where a kernel (or a seccomp filter) refuses part of it.

On Linux 5.5 and 5.6 clone3 takes CLONE_CLEAR_SIGHAND but not CLONE_INTO_CGROUP (5.7): a spawn
into a cgroup there tried INTO_CGROUP, refused, then a plain clone3, on every spawn. The refusal
is remembered as CLEAR_SIGHAND's is (csrc/spawn.c), so only the first spawn pays it.

Where clone3 is refused with ENOSYS (Docker's default seccomp filter), the copy-on-write child
comes from the raw clone system call, never libc's fork(), which would run every pthread_atfork
handler of the runner's (a numerical library's, say) in the runner and in the child before its
first step, and give no pidfd; and that refusal is remembered too.

Such a kernel is made by a preloaded shim: ``uname`` says 5.6 (so the spawn takes the
copy-on-write child, whose system calls go through libc's ``syscall``), and ``syscall`` refuses
a clone3 asking for CLONE_INTO_CGROUP, counting each, as such a kernel does: its clone3 knows a
struct 80 bytes long and refuses a longer one whose extra bytes (the cgroup field) are not zero
with E2BIG, before it looks at the flags. With PK_TEST_NO_CLONE3 set it refuses every clone3
with ENOSYS instead; and a constructor registers a pthread_atfork handler that counts its
calls."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("processkit._native")
pytestmark = [
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc for the preloaded shim"),
    pytest.mark.skipif("LD_PRELOAD" in os.environ, reason="a sanitizer's runtime is preloaded already"),
]

KERNEL_5_6 = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/utsname.h>

static int refused, handled, no_clone3;

int refused_clone3(void)
{
    return refused;
}

int atfork_calls(void)
{
    return handled;
}

static void count(void)
{
    handled++;
}

__attribute__((constructor)) static void start(void)
{
    no_clone3 = getenv("PK_TEST_NO_CLONE3") != NULL;
    pthread_atfork(count, count, count);
}

int uname(struct utsname *name)
{
    int (*real)(struct utsname *) = (int (*)(struct utsname *))dlsym(RTLD_NEXT, "uname");
    int done = real(name);
    if (done == 0)
        snprintf(name->release, sizeof name->release, "5.6.19");
    return done;
}

long syscall(long number, ...)
{
    long (*real)(long, ...) = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    long a[6];
    va_list args;
    int i;
    va_start(args, number);
    for (i = 0; i < 6; i++)
        a[i] = va_arg(args, long);
    va_end(args);
    if (number == SYS_clone3 && no_clone3) {
        refused++;
        errno = ENOSYS;
        return -1;
    }
    if (number == SYS_clone3 && (*(const uint64_t *)a[0] & 0x200000000ULL)) {
        refused++;
        errno = (unsigned long)a[1] > 80 && ((const uint64_t *)a[0])[10] ? E2BIG : EINVAL;
        return -1;
    }
    return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
"""

SPAWNS = r"""
import ctypes, os, sys
from processkit import native
from processkit.containment.base import ChildJoins
from processkit.engine import spawn_native

assert native.module().lib.pk_spawn_shared_memory() == 0, "the shim's kernel takes the copy-on-write child"
group = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)  # never reaches the kernel: the shim refuses it
procs = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o600)  # the child's join by write lands here
for _ in range(3):
    result = spawn_native.Pending(["true"], {"PATH": "/usr/bin:/bin"}, None, ChildJoins(group, procs), [-1, -1, -1], False, 0, False, passed=()).wait()
    assert result.stage == 0, (result.stage, result.error)
    os.waitpid(result.pid, 0)
print(ctypes.CDLL(None).refused_clone3(), os.path.getsize(sys.argv[2]))
"""


COPY_ON_WRITE = r"""
import ctypes, os
from processkit import native
from processkit.containment.base import ChildJoins
from processkit.engine import spawn_native

assert native.module().lib.pk_spawn_shared_memory() == 0, "the shim's kernel takes the copy-on-write child"
pidfds = []
for _ in range(3):
    result = spawn_native.Pending(["true"], {"PATH": "/usr/bin:/bin"}, None, ChildJoins(), [-1, -1, -1], False, 0, own_memory=True, passed=()).wait()
    assert result.stage == 0, (result.stage, result.error)
    pidfds.append(result.pidfd)
    os.waitpid(result.pid, 0)
shim = ctypes.CDLL(None)
print(shim.atfork_calls(), shim.refused_clone3(), int(all(fd >= 0 for fd in pidfds)))
"""


def _shim(tmp_path) -> str:
    source, shim = tmp_path / "kernel.c", tmp_path / "kernel.so"
    source.write_text(KERNEL_5_6)
    built = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-o", str(shim), str(source), "-ldl", "-lpthread"],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    return str(shim)


def test_a_refused_clone_into_cgroup_is_tried_on_the_first_spawn_only(tmp_path):
    (tmp_path / "group").mkdir()
    env = dict(os.environ, LD_PRELOAD=_shim(tmp_path))
    argv = [sys.executable, "-c", SPAWNS, str(tmp_path / "group"), str(tmp_path / "procs")]
    done = subprocess.run(argv, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # The first spawn's one try (refused for the struct, E2BIG, before CLEAR_SIGHAND is looked at,
    # so not tried again without it), none after; each of the three children joined by write.
    assert done.stdout.split() == [b"1", b"3"]


@pytest.fixture(scope="module")
def without_clone3(tmp_path_factory) -> list[bytes]:
    """Three copy-on-write spawns where clone3 is refused with ENOSYS: the atfork handler's
    calls, the refused clone3 calls, and whether each child came with a pidfd."""
    env = dict(os.environ, LD_PRELOAD=_shim(tmp_path_factory.mktemp("no_clone3")), PK_TEST_NO_CLONE3="1")
    done = subprocess.run([sys.executable, "-c", COPY_ON_WRITE], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_copy_on_write_child_without_clone3_runs_no_atfork_handler_and_has_a_pidfd(without_clone3):
    handler_calls, _, with_pidfds = without_clone3
    assert (handler_calls, with_pidfds) == (b"0", b"1")


def test_a_clone3_refused_with_enosys_is_tried_on_the_first_spawn_only(without_clone3):
    assert without_clone3[1] == b"1"
