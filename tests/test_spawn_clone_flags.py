"""The native spawn's clone3 flags that a kernel may refuse. On Linux 5.5 and 5.6 clone3 takes
CLONE_CLEAR_SIGHAND but not CLONE_INTO_CGROUP (5.7): a spawn into a cgroup there tried
INTO_CGROUP, refused, then a plain clone3, on every spawn. The
refusal is remembered as CLEAR_SIGHAND's is (csrc/spawn.c), so only the first spawn pays it.

Such a kernel is made by a preloaded shim: ``uname`` says 5.6 (so the spawn takes the
copy-on-write child, whose clone3 goes through libc's ``syscall``), and ``syscall`` refuses a
clone3 asking for CLONE_INTO_CGROUP, counting each, as such a kernel does: its clone3 knows a
struct 80 bytes long and refuses a longer one whose extra bytes (the cgroup field) are not zero
with E2BIG, before it looks at the flags."""

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
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/utsname.h>

static int refused;

int refused_into_cgroup(void)
{
    return refused;
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
    result = spawn_native.native_spawn(["true"], {"PATH": "/usr/bin:/bin"}, None, ChildJoins(group, procs), [-1, -1, -1], False)
    assert result.stage == 0, (result.stage, result.error)
    os.waitpid(result.pid, 0)
print(ctypes.CDLL(None).refused_into_cgroup(), os.path.getsize(sys.argv[2]))
"""


def test_a_refused_clone_into_cgroup_is_tried_on_the_first_spawn_only(tmp_path):
    source, shim = tmp_path / "kernel.c", tmp_path / "kernel.so"
    source.write_text(KERNEL_5_6)
    built = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-o", str(shim), str(source), "-ldl"], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    (tmp_path / "group").mkdir()
    env = dict(os.environ, LD_PRELOAD=str(shim))
    argv = [sys.executable, "-c", SPAWNS, str(tmp_path / "group"), str(tmp_path / "procs")]
    done = subprocess.run(argv, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # The first spawn's one try (refused for the struct, E2BIG, before CLEAR_SIGHAND is looked at,
    # so not tried again without it), none after; each of the three children joined by write.
    assert done.stdout.split() == [b"1", b"3"]
