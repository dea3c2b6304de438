"""A runner whose cgroup2 mount is a subtree of the hierarchy (a container's delegated group
bind-mounted at the mount point, without a cgroup namespace): mountinfo gives the mount a root
that is not ``/``, and ``/proc/<pid>/cgroup`` names groups from the hierarchy's root. The
runner's own group is found below that mount's root (``cgroup_v2.own_group``), its runs get
cgroup v2 groups there, and the sweep after a run reads groups as ``CgroupV2.holds`` does
(``cgroup_v2.within``): a caller's background job that daemonized in the runner's own group
during the run is the caller's, left running. A mount over the cgroup2 mount point of another
type (a tmpfs) hides it: no cgroup2 mount is in force there."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import time

import pytest

from conftest import cli_command, read_events
from own_tmp import PRIVATE_MOUNTS, in_own_mounts
from processkit.containment.cgroup_v2 import own_group
from streams import PY, one
from test_cgroup_escapees import _remove_when_empty
from test_run_escapees import LINGER

# The caller's job: once the run runs (argv[1] + ".running"), it forks a daemon and exits; the
# daemon makes a session of its own and, once it is this job's orphan (re-parented to the
# runner, its subreaper), writes its pid to argv[1] and sleeps on.
CALLER_JOB = (
    LINGER
    + r"""
where = sys.argv[1]
while not os.path.exists(where + ".running"):
    time.sleep(0.01)
job = os.getpid()
if os.fork() == 0:
    os.setsid()
    while os.getppid() == job:
        time.sleep(0.01)
    linger(where)
"""
)

# The run's command: says it runs, then exits once the test has opened a pidfd on the caller's
# daemon (argv[1] + ".opened"): the run's sweep, which could end the daemon, comes only after.
RUN_COMMAND = r"""
import os, sys, time
where = sys.argv[1]
open(where + ".running", "w").close()
while not os.path.exists(where + ".opened"):
    time.sleep(0.01)
"""

# $1 the group, $2 the cgroup2 mount point, $3 the job's file, $4 the stream; then the CLI's
# command. The shell moves into the group, which is bound over the mount point, starts the job
# and becomes the CLI.
ENTER = (
    'echo $$ > "$1/cgroup.procs"; mount --bind "$1" "$2"; '
    'g=$1 m=$2 w=$3 j=$4; shift 4; "$PYTHON" -c "$JOB" "$w" & '
    'exec "$@" run --jsonl "$j" -- "$PYTHON" -c "$RUN" "$w"'
)


@pytest.fixture
def cgroup2_mount() -> str:
    """The cgroup2 mount point, where this test may mount in a namespace of its own."""
    mount, _ = own_group()
    if mount is None or os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs root, unshare, mount and a cgroup2 mount")
    return mount


@pytest.fixture
def subtree(cgroup2_mount):
    """A group of the test's own below the cgroup2 mount, removed once empty."""
    mount = cgroup2_mount
    group = os.path.join(mount, f"pk-mounted-subtree-{os.getpid()}")
    os.mkdir(group)
    yield mount, group
    _remove_when_empty(group)


def test_a_runner_in_a_mounted_subtree_gets_v2_groups_and_spares_the_callers_daemon(tmp_path, subtree):
    mount, group = subtree
    where, events = str(tmp_path / "daemon"), tmp_path / "events.jsonl"
    env = dict(os.environ, PYTHON=PY, JOB=CALLER_JOB, RUN=RUN_COMMAND)
    argv = [*PRIVATE_MOUNTS, "sh", "-ec", ENTER, "sh", group, mount, where, str(events), *cli_command()]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd="/", stdin=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while not os.path.exists(where):
        if proc.poll() is not None:
            _, err = proc.communicate()
            _skip_where_refused(err)
            pytest.fail(f"ended before the caller's daemon was there: {err!r}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the caller's daemon never said it was there: {proc.communicate()}")
        time.sleep(0.01)
    pidfd = os.pidfd_open(int(open(where).read()))  # the run waits for the file written next
    open(where + ".opened", "w").close()
    _, err = proc.communicate(timeout=120)
    try:
        found = read_events(events)
        assert proc.returncode == 0, err
        assert one(found, "run_started")["mechanism"] == "cgroup_v2", "the runner's own group was not found"
        assert one(found, "cleanup_finished")["remaining_pids"] == []
        assert not select.select([pidfd], [], [], 0)[0], "the caller's daemon was ended by the run's sweep"
        assert b"had left" not in err, err
    finally:
        if not select.select([pidfd], [], [], 0)[0]:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            select.select([pidfd], [], [])
        os.close(pidfd)


def _skip_where_refused(err: bytes) -> None:
    """Skips where the namespace or the mount was refused (a container without the privilege)."""
    if err.startswith((b"unshare:", b"mount:")):
        pytest.skip(f"no private mount namespace or mount here: {err.decode(errors='replace')}")


def test_a_tmpfs_over_the_cgroup2_mount_point_hides_it(cgroup2_mount):
    """The runner finds no cgroup2 mount in force (its runs fall back to a process group) where
    another file system is mounted over the cgroup2 mount point, as ``mountinfo.filesystem_type``
    reads the last mount at a point; it took the hidden mount for one in force."""
    script = f'mount -t tmpfs none "{cgroup2_mount}"; exec "$PYTHON" -c "$LOOK"'
    look = "from processkit.containment.cgroup_v2 import own_group; print(own_group())"
    done = in_own_mounts(script, dict(os.environ, PYTHON=PY, LOOK=look))
    _skip_where_refused(done.stderr)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == "(None, None)", done.stdout
