"""The session's leak check (``tests/leak_check.py``) fails a session whose runner left a group,
naming the group and the test, and never counts a group no child of the session made."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import leak_check
import pytest

from conftest import cli_command
from own_tmp import PRIVATE_MOUNTS
from run_groups import groups_of
from test_groups_left import COVER, _usable

# A session whose one test leaves a group no sweep can ever remove: the runner's /tmp and
# /dev/shm are tmpfs mounts of its own mount namespace, so its run directory goes with it, and
# its pids group cannot be removed while the job's mount covers it (tests/test_groups_left.py).
INNER = r"""
import json, os, subprocess

# A checkout or a venv under /tmp (a fresh clone's CI) is bound back in from /mnt, where /tmp
# was kept: LEAK_KEEP holds those paths, one a line.
ENTER = (
    'mount --bind /tmp /mnt && mount -t tmpfs t /tmp && mount -t tmpfs t /dev/shm && '
    'printf "%s\\n" "$LEAK_KEEP" | while IFS= read -r keep; do [ -z "$keep" ] || '
    '{ mkdir -p "$keep" && mount --bind "/mnt${keep#/tmp}" "$keep"; } || exit 1; done && '
    'mkdir /tmp/cover && exec "$@"'
)


def test_leaves_a_group():
    command = [*json.loads(os.environ["LEAK_UNSHARE"]), "sh", "-c", ENTER, "sh", *json.loads(os.environ["LEAK_CLI"])]
    command += ["run", "--jsonl", "/tmp/run.jsonl", "--", "sh", "-c", os.environ["LEAK_COVER"], "/tmp/cover"]
    runner = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    with open(os.environ["LEAK_PID_FILE"], "w") as handle:
        handle.write(str(runner.pid))
    assert runner.wait(timeout=60) == 0
"""


CHECKOUT = str(Path(__file__).resolve().parent.parent)  # the CLI's sources, for an editable install
# What the inner session must still see under /tmp: the sources and the venv of the CLI it runs.
KEEP = sorted({path for path in (CHECKOUT, os.path.realpath(sys.prefix)) if path.startswith("/tmp/")})


@pytest.mark.skipif(
    not _usable() or not os.path.isdir("/mnt"), reason="needs root, unshare, mount, /mnt and a writable cgroup v1 pids"
)
def test_a_session_whose_runner_left_a_group_fails_naming_it_and_the_test(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parent),
        "PROCESSKIT_TEST_LEAK_SETTLE": "0.2",
        "LEAK_UNSHARE": json.dumps(PRIVATE_MOUNTS),
        "LEAK_CLI": json.dumps(cli_command()),
        "LEAK_COVER": COVER,
        "LEAK_PID_FILE": str(tmp_path / "pid"),
        "LEAK_KEEP": "\n".join(KEEP),
    }
    env.pop("PROCESSKIT_TEST_LEAK_CHECK", None)
    inner = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "leak_check", "test_inner.py"]
    proc = subprocess.run(inner, cwd=tmp_path, env=env, capture_output=True, timeout=120)
    runner = int((tmp_path / "pid").read_text())
    left = groups_of(runner)
    try:
        assert left, "the inner runner left nothing: this test shows nothing\n" + proc.stdout.decode()[-3000:]
        out = proc.stdout.decode()
        assert proc.returncode != 0, out
        assert f"the session left {len(left)} cgroup(s) of its runners on the host" in out, out
        for group in left:
            assert f"{group}  (a runner test_inner.py::test_leaves_a_group started)" in out, out
    finally:
        for group in sorted(left, key=len, reverse=True):  # empty, and made by this test's runner
            os.rmdir(group)


def test_only_a_childs_token_made_while_it_was_the_sessions_counts():
    """A token names its runner's pid and the time it was made: a group counts only when the pid
    was a child's of the session's at that time (from before its fork to after its reaping),
    never another runner's that had or later got the same pid."""
    group = "/sys/fs/cgroup/pids/processkit-run-4242-{:x}-0.j100000001"
    spawned = [[4242, 1000, 2000, "t::reaped"], [4242, 5000, None, "t::live"], [77, 100, None, "t::other"]]
    assert leak_check.child_of(group.format(1500), spawned, now=9000) == spawned[0]
    assert leak_check.child_of(group.format(7000), spawned, now=9000) == spawned[1]
    assert leak_check.child_of(group.format(3000), spawned, now=9000) is None  # between the two: not ours
    assert leak_check.child_of(group.format(900), spawned, now=9000) is None  # before the fork
    assert leak_check.child_of(group.format(9500), spawned, now=9000) is None  # after the check
    assert leak_check.child_of("/sys/fs/cgroup/pids/processkit-run-x-1-0", spawned, now=9000) is None
