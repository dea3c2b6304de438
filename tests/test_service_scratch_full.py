"""The runner service's scratch directory when its base is full: another user can fill /dev/shm
(a world-writable tmpfs: its space or its inodes), and the service could not start, so every
``processkit.run`` of every caller on the host raised ``ServiceGone: the runner service of this
process has ended``, saying neither why nor what to do. The service now makes its directory in
``/tmp`` when the batch base cannot hold it, and a service that can make it nowhere says why.

The full tmpfs is mounted in a mount namespace of the test's own (``unshare``), over /dev/shm and
then /tmp too, so nothing outside it sees the mounts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import processkit

# The full tmpfs hides what was below its mount point: a checkout or an interpreter there (a CI
# that clones into /tmp) is out of the child's reach, and the test says nothing of the product.
_UNDER_MOUNTS = any(
    os.path.realpath(path).startswith(("/tmp/", "/dev/shm/")) for path in (processkit.__file__, sys.executable)
)
pytestmark = [
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None,
        reason="needs root, unshare and mount for a full tmpfs of the test's own",
    ),
    pytest.mark.skipif(
        _UNDER_MOUNTS, reason="processkit or its interpreter lives under /tmp or /dev/shm, which the test fills"
    ),
]

# A tmpfs of three inodes: its root and two directories fill it, as another user's files would.
FILL = 'mount -t tmpfs -o size=64k,nr_inodes=3,mode=1777 tmpfs "$1" && mkdir "$1/a" "$1/b"'
CALLER = r"""
import processkit
try:
    result = processkit.run(["echo", "hi"], capture_output=True)
    print("ran", result.returncode, result.stdout.decode().strip())
except RuntimeError as exc:
    print("raised", type(exc).__name__, exc)
"""


# The same call, counting the services it starts (each one ``service_command`` line).
COUNT = r"""
from processkit.api import service
started, command = [], service.service_command
service.service_command = lambda *given: started.append(1) or command(*given)
"""
COUNTING = COUNT + CALLER + 'print("services", len(started))\n'


def _call_with_full(*bases: str, caller: str = CALLER, full: str = FILL) -> str:
    fill = "; ".join(f"sh -c '{full}' sh {base}" for base in bases)
    env = {key: value for key, value in os.environ.items() if key != "XDG_RUNTIME_DIR"}  # the base is /dev/shm
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", f'{fill}; exec "$0" -c "$1"']
        + [sys.executable, caller],
        capture_output=True,
        timeout=120,
        env=env,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode().strip()


def test_a_full_dev_shm_leaves_the_service_its_scratch_in_tmp():
    assert _call_with_full("/dev/shm") == "ran 0 hi"


def test_a_service_that_can_make_its_scratch_nowhere_says_why():
    said = _call_with_full("/dev/shm", "/tmp")
    assert said.startswith("raised ServiceUnstartable the runner service cannot make its scratch directory"), said
    assert "in /dev/shm: No space left on device" in said and "in /tmp: No space left on device" in said, said


# Room for the service's scratch directory and nothing more: its root, one directory, the scratch.
ROOM_FOR_ONE = 'mount -t tmpfs -o size=64k,nr_inodes=3,mode=1777 tmpfs "$1" && mkdir "$1/a"'
RING = r"""
import processkit
result = processkit.run(["echo", "hi"], capture_output=True, capture_keep="tail")
print(result.returncode, result.diagnostics)
"""


def test_a_capture_directory_the_scratch_has_no_room_for_is_a_set_up_failure():
    """A ring capture with no ``capture_dir=`` is made in the service's scratch directory: a base
    with no room left for it (``ENOSPC``) fails the run's set-up (111, saying why), as the
    engine's own making of a capture directory does, not 104 "internal error: OSError"."""
    said = _call_with_full("/dev/shm", caller=RING, full=ROOM_FOR_ONE)
    assert said.startswith("111 "), said
    assert "could not set up output capture in `" in said and "No space left on device" in said, said


def test_a_service_that_cannot_start_is_started_once_per_call():
    """Its hello says why it could not start: the call raises that at once. The retry of a
    service found gone (killed since the last call) is not for it: it started a second service
    on every call, to fail the same way."""
    said = _call_with_full("/dev/shm", "/tmp", caller=COUNTING).splitlines()
    assert said[0].startswith("raised ServiceUnstartable") and said[1] == "services 1", said


KILLED = r"""
import os, signal, processkit
from processkit.api import shared
assert processkit.run(["true"]).returncode == 0
found = shared.connection()
print(found.scratch, flush=True)
os.kill(found.pid, signal.SIGKILL)  # killed: its directory is left where it made it
found.process.wait()
"""


def test_a_killed_services_scratch_in_tmp_is_swept_once_dev_shm_has_room():
    """A service killed after it made its directory in ``/tmp`` (``/dev/shm`` full then) left
    it there for ever: a service sweeps the base it makes its own in, and once ``/dev/shm`` had
    room again none made one in ``/tmp``. Its mark there has the next service sweep it."""
    env = {key: value for key, value in os.environ.items() if key != "XDG_RUNTIME_DIR"}  # the base is /dev/shm
    script = (
        f"sh -c '{FILL}' sh /dev/shm; mount -t tmpfs -o size=16m,mode=1777 tmpfs /tmp; "
        '"$0" -c "$1"; rmdir /dev/shm/a /dev/shm/b; "$0" -c "$2"; echo left: $(ls -A /tmp)'
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script, sys.executable, KILLED, CALLER],
        capture_output=True,
        timeout=120,
        env=env,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    said = done.stdout.decode().splitlines()
    assert said[0].startswith("/tmp/processkit-api-"), said  # made in /tmp, then killed
    assert said[1] == "ran 0 hi", said
    # A run that outlasts the late publication's 50 ms (a loaded host) is registered, and the test's
    # registry (under pytest's own /tmp directory) is made again in the fresh /tmp: not the scratch.
    registry = os.path.relpath(os.environ["PROCESSKIT_CLI_REGISTRY_DIR"], "/tmp").split(os.sep)[0]
    assert said[2].startswith("left:") and set(said[2].split()[1:]) <= {registry}, said


LARGE = r"""
import processkit
result = processkit.run(["head", "-c", "3000000", "/dev/zero"], capture_output=True)
print(result.returncode, None if result.stdout is None else len(result.stdout))
"""


def test_a_large_capture_the_full_scratch_cannot_take_comes_back_in_the_reply():
    """A capture over 1 MiB is copied to a file of the scratch for the caller to read: with the
    scratch full (no room for the file, nor its directory), the run's output was dropped and its
    ``stdout`` None, with a 0 exit and nothing said. It now comes back in the reply itself."""
    assert _call_with_full("/dev/shm", caller=LARGE, full=ROOM_FOR_ONE) == "0 3000000"


HUGE = r"""
import warnings
import processkit
from processkit.service import scratch
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as said:
    result = processkit.run(["head", "-c", str(scratch.INLINE_FALLBACK_MOST + 1), "/dev/zero"], capture_output=True)
print(result.returncode, result.stdout)
print(result.diagnostics.strip())
print([warning.category.__name__ for warning in said])
print([(warning.filename, str(warning.message).split(":")[0]) for warning in said])
"""


def test_a_capture_over_the_replys_bound_the_full_scratch_cannot_take_is_said_lost():
    """Over ``INLINE_FALLBACK_MOST`` (64 MiB) the reply carries no bytes (the service held the
    whole capture in its heap and the caller read it whole; 4 GiB overflowed the frame's length):
    the result's diagnostics and a ``CaptureWriteFailed`` say so, with the byte count."""
    said = _call_with_full("/dev/shm", caller=HUGE, full=ROOM_FOR_ONE).splitlines()
    assert said[0] == "0 None", said
    assert said[1].startswith(f"processkit: the run's stdout not returned ({(64 << 20) + 1} bytes): no room"), said
    assert "/dev/shm/" in said[1] and "No space left on device" in said[1] and "64 MiB" in said[1], said
    assert said[2] == "['CaptureWriteFailed']", said
    # At the caller's line, named as the call was made (it pointed into processkit/api/launch.py).
    assert said[3] == "[('<string>', \"processkit.run('head', ...)\")]", said
