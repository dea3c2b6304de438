"""A runner whose cgroup2 mount is a subtree of the hierarchy (a container's delegated group
bind-mounted at the mount point, without a cgroup namespace): mountinfo gives the mount a root
that is not ``/``, and ``/proc/<pid>/cgroup`` names groups from the hierarchy's root. The
runner's own group is found below that mount's root (``cgroup_v2.own_group``), its runs get
cgroup v2 groups there, and the sweep after a run reads groups as ``CgroupV2.holds`` does
(``cgroup_v2.within``): a caller's background job that daemonized in the runner's own group
during the run is the caller's, left running."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

import pytest

from conftest import cli_command, read_events
from own_tmp import PRIVATE_MOUNTS
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

# The run's command: says it runs, then exits once the caller's daemon is there.
RUN_COMMAND = r"""
import os, sys, time
where = sys.argv[1]
open(where + ".running", "w").close()
while not os.path.exists(where):
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
def subtree():
    """A group of the test's own below the cgroup2 mount, removed once empty."""
    mount, _ = own_group()
    if mount is None or os.geteuid() != 0:
        pytest.skip("needs root and a cgroup2 mount")
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
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    pidfd = os.pidfd_open(int(open(where).read()))  # before the run can end: the daemon waits for it
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
