"""The mark of a user's scratch directories in ``/tmp`` (``/tmp/.processkit-api-elsewhere-<uid>``,
made when the batch base cannot hold the runner service's directory: ``scratch._marked``) has a
name anyone can predict, so another OS user can make something there first. Whatever it is (a
file, a directory, a FIFO, a link to a file of the user's), the service never uses it: it starts
without the mark, its calls run, what the other user made is left as it was, and the service's
trace (``strace -y``) shows no lock taken on it, nor on the file a link there names.

Everything happens in a mount namespace of the test's own (``unshare``): /dev/shm is a full tmpfs
(so the service makes its directory in /tmp), and /tmp a fresh tmpfs, so the host's /tmp, its
other users' and other sessions' marks, are never touched."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

import processkit
from own_tmp import in_own_mounts
from test_other_users import other_user  # noqa: F401 - the fixture: a second OS user

_UNDER_MOUNTS = any(
    os.path.realpath(path).startswith(("/tmp/", "/dev/shm/")) for path in (processkit.__file__, sys.executable)
)
pytestmark = [
    pytest.mark.skipif(
        os.geteuid() != 0 or not all(shutil.which(tool) for tool in ("unshare", "mount", "setpriv", "strace")),
        reason="needs root, unshare, mount, setpriv and strace",
    ),
    pytest.mark.skipif(_UNDER_MOUNTS, reason="processkit or its interpreter lives under /tmp or /dev/shm"),
]

CALLER = r"""
import processkit
from processkit.api import shared
result = processkit.run(["echo", "hi"], capture_output=True)
print("ran", result.returncode, result.stdout.decode().strip(), "in", shared.connection().scratch.rsplit("-", 2)[0])
"""
# What the other user makes at the mark's name ("$1"); "$2" is a file of the caller's.
SQUATS = {
    "file": 'printf squat > "$1"',
    "directory": 'mkdir "$1"',
    "fifo": 'mkfifo "$1"',
    "link": 'ln -s "$2" "$1"',
}
STEPS = r"""
mount -t tmpfs -o size=64k,nr_inodes=3,mode=1777 tmpfs /dev/shm && mkdir /dev/shm/a /dev/shm/b
mount -t tmpfs -o size=16m,mode=1777 tmpfs /tmp
mark="/tmp/.processkit-api-elsewhere-$(id -u)"
printf mine > /tmp/caller.lock
setpriv --reuid="$OTHER" --regid="$OTHER_GID" --init-groups sh -ec "$SQUAT" sh "$mark" /tmp/caller.lock
before=$(stat -c '%F %U %s %i' "$mark")
strace -f -qq -y -e trace=openat,flock -o /tmp/trace "$PYTHON" -c "$CALLER"
after=$(stat -c '%F %U %s %i' "$mark")
[ "$before" = "$after" ] && echo "squat untouched: $after" || echo "squat changed: $before -> $after"
echo "opens of the mark's name: $(grep -c "openat(.*\"$mark\"" /tmp/trace)"
grep -E "flock\([0-9]+<($mark|/tmp/caller\.lock)>" /tmp/trace | sed 's/^/locked: /' || true
echo "caller's file: $(cat /tmp/caller.lock)"
ls -A /tmp | grep -c '^processkit-api-' || true
"""


@pytest.mark.parametrize("kind", sorted(SQUATS))
def test_another_users_squat_at_the_marks_name_is_never_used(kind, other_user):  # noqa: F811
    env = {key: value for key, value in os.environ.items() if key != "XDG_RUNTIME_DIR"}  # the base is /dev/shm
    env.update(OTHER=other_user.pw_name, OTHER_GID=str(other_user.pw_gid), SQUAT=SQUATS[kind])
    env.update(PYTHON=sys.executable, CALLER=CALLER)
    done = in_own_mounts(STEPS, env, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout.splitlines()
    assert said[0] == "ran 0 hi in /tmp/processkit-api", said  # its scratch in /tmp, where the mark is
    assert said[1].startswith("squat untouched: ") and f" {other_user.pw_name} " in said[1], said
    # The service looked at the mark's name (so the trace saw it), and locked neither the squat nor
    # the caller's file a link there names (a lock, not a change, is what a use of it would leave).
    assert said[2].startswith("opens of the mark's name: ") and int(said[2].rsplit(" ", 1)[1]) > 0, said
    assert said[3:] == ["caller's file: mine", "0"], said  # no "locked: " line; the service's directory gone
