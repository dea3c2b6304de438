"""A call's child cannot read another call's captures through its runner service's /proc entry.

The service holds every call's captured output (and input, and held stream) in memfds, and a
run's child is the service's child, of the same user: through ``/proc/<service pid>/fd/N`` it
could open each of them and read another thread's call's output while that call ran. The
service makes itself not dumpable, so its /proc entry's descriptors (and ptrace) are the
kernel's to refuse to every other process of that user; its children, after their exec, are
dumpable as ever.

The caller runs as a second OS user when the tests run as root (root reads any process's
descriptors whatever), as the test's own user otherwise: the attacker is always of the
service's user, not privileged. Every path is the test's own (a directory it made)."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import tempfile

import pytest

import processkit
from privileges import as_user
from test_other_users import other_user  # noqa: F401 - the session's second user (a fixture)

CALLER = r"""
import os, sys, threading, processkit
from processkit.api import shared
place = sys.argv[1]
secret = os.urandom(12).hex()
done = os.path.join(place, "done")
seen = {}

def victim():
    # prints the secret into its captured stdout, then waits until told to end
    seen["a"] = processkit.run(
        ["sh", "-c", 'printf %s "$0"; while [ ! -e "$1" ]; do sleep 0.05; done', secret, done],
        capture_output=True, timeout=60,
    )

thread = threading.Thread(target=victim)
thread.start()
try:
    # the secret reaches the attacker through its environment, which no memfd of the service holds
    seen["b"] = processkit.run([sys.executable, "-c", ATTACK], capture_output=True, timeout=60,
                               env=dict(os.environ, PK_SECRET=secret))
finally:
    open(done, "w").close()
    thread.join()
assert seen["a"].returncode == 0 and seen["a"].stdout.decode() == secret, seen["a"]
print(seen["b"].stdout.decode().strip())
print(shared.connection().process.pid)  # the service, which tidies the runs' files after its caller ends
"""

# The child of the service reading its parent's descriptors, again until it finds the secret
# (the service copies the other call's output into its memfd as it comes) or is refused.
ATTACK = r"""
import os, stat, sys, time
secret, parent = os.environ["PK_SECRET"].encode(), os.getppid()
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    try:
        names = os.listdir(f"/proc/{parent}/fd")
    except PermissionError:
        print("refused")
        sys.exit(0)
    for name in names:
        try:
            fd = os.open(f"/proc/{parent}/fd/{name}", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) and secret in os.pread(fd, 1 << 20, 0):
                print("read another call's capture")
                sys.exit(0)
        finally:
            os.close(fd)
    time.sleep(0.05)
print("not found")
"""


def _as_user(user) -> tuple[list[str], str]:
    """The prefix that runs a command as ``user`` (none: this process's own), and a Python it can run."""
    if user is None:
        return [], sys.executable
    prefix = as_user(user)
    again = (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'], check=True)"  # as the service starts
    )
    for python in (sys.executable, "/usr/bin/python3"):
        if subprocess.run([*prefix, python, "-c", again], capture_output=True, cwd="/").returncode == 0:
            return prefix, python
    pytest.skip("no Python a second user can run here")


@pytest.fixture
def attacker(request):
    """The unprivileged user that runs the caller: the second user as root, else this one."""
    if os.geteuid() != 0:
        return None
    return request.getfixturevalue("other_user")


def test_a_calls_child_cannot_read_another_calls_capture_through_the_service(attacker):
    place = tempfile.mkdtemp(prefix="pk-memfd-")
    try:
        if attacker is not None:
            os.chown(place, attacker.pw_uid, attacker.pw_gid)
        prefix, python = _as_user(attacker)
        package = os.path.dirname(os.path.dirname(processkit.__file__))
        env = dict(
            os.environ,
            PYTHONPATH=package,
            PROCESSKIT_CLI_REGISTRY_DIR=os.path.join(place, "runs"),
            HOME=place,
            TMPDIR=place,
        )
        probe = "import processkit, processkit.service.serve"
        if subprocess.run([*prefix, python, "-c", probe], capture_output=True, env=env, cwd=place).returncode != 0:
            pytest.skip("processkit is not importable by a second user here")
        script = CALLER.replace("ATTACK", repr(ATTACK))
        done = subprocess.run(
            [*prefix, python, "-c", script, place], capture_output=True, env=env, cwd=place, timeout=120
        )
        assert done.returncode == 0, done.stderr.decode()
        said, service = done.stdout.decode().split()
        assert said == "refused"
        _wait_ended(int(service))
    finally:
        shutil.rmtree(place)


def _wait_ended(pid: int) -> None:
    """Wait until the caller's service has ended: it removes its runs' lock files as it ends, which
    a removal of the test's directory racing it would find gone under it."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        assert select.select([pidfd], [], [], 60)[0], "the service outlived its caller by a minute"
    finally:
        os.close(pidfd)
