"""The native spawn's copy-on-write child where clone3 is refused with ENOSYS, as Docker's
default seccomp filter does: the child comes from the raw clone system call, never libc's
fork(), which would run every pthread_atfork handler of the runner's (a numerical library's, say)
in the runner and in the child before its first step, and give no pidfd; and the refusal is
remembered, so only the first spawn tries clone3.

The machine is made by a preloaded shim: ``uname`` says 5.6 (so every spawn takes the
copy-on-write child, whose system calls go through libc's ``syscall``), ``syscall`` refuses
clone3 with ENOSYS, counting each, and a constructor registers a pthread_atfork handler that
counts its calls."""

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

NO_CLONE3 = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/utsname.h>

static int refused, handled;

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

__attribute__((constructor)) static void hook(void)
{
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
    if (number == SYS_clone3) {
        refused++;
        errno = ENOSYS;
        return -1;
    }
    return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
"""

SPAWNS = r"""
import ctypes, os
from processkit import native
from processkit.containment.base import ChildJoins
from processkit.engine import spawn_native

assert native.module().lib.pk_spawn_shared_memory() == 0, "the shim's kernel takes the copy-on-write child"
pidfds = []
for _ in range(3):
    joins = ChildJoins(-1, -1)
    result = spawn_native.native_spawn(["true"], {"PATH": "/usr/bin:/bin"}, None, joins, [-1, -1, -1], False, own_memory=True)
    assert result.stage == 0, (result.stage, result.error)
    pidfds.append(result.pidfd)
    os.waitpid(result.pid, 0)
shim = ctypes.CDLL(None)
print(shim.atfork_calls(), shim.refused_clone3(), int(all(fd >= 0 for fd in pidfds)))
"""


@pytest.fixture(scope="module")
def spawned(tmp_path_factory) -> list[bytes]:
    """Three copy-on-write spawns under the shim: the handler's calls, the refused clone3
    calls, and whether each child came with a pidfd."""
    tmp_path = tmp_path_factory.mktemp("no_clone3")
    source, shim = tmp_path / "no_clone3.c", tmp_path / "no_clone3.so"
    source.write_text(NO_CLONE3)
    built = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-o", str(shim), str(source), "-ldl", "-lpthread"],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    env = dict(os.environ, LD_PRELOAD=str(shim))
    done = subprocess.run([sys.executable, "-c", SPAWNS], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_copy_on_write_child_without_clone3_runs_no_atfork_handler_and_has_a_pidfd(spawned):
    handler_calls, _, with_pidfds = spawned
    assert (handler_calls, with_pidfds) == (b"0", b"1")


def test_a_clone3_refused_with_enosys_is_tried_on_the_first_spawn_only(spawned):
    assert spawned[1] == b"1"
