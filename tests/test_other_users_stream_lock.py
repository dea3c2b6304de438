"""Another user's read lock on a run's stream refuses no run. A run holds its ``--jsonl`` alone by
an exclusive lock of its open file description (``F_OFD_SETLK``, one stream, one run:
tests/test_shared_jsonl.py), which any lock in its way refused, a read lock too: ``pkit-other``
(test_other_users.py's second user), who may read root's stream where the umask left it
readable (0644), took one and root's next ``run --jsonl`` of that path failed (111, "another
run is writing it") without starting its child, for as long as it held it. A read lock is no run
writing the file: the run now writes it unlocked; a write lock (a runner's) still refuses the
second run, with the C module and without it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import SAFETY_NET, cli_command
from privileges import as_user
from test_other_users import other_user, shared  # noqa: F401  (fixtures)

LOCKER = """
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
print("held", flush=True)
sys.stdin.read()
"""
NO_NATIVE = "import sys; sys.modules['processkit._native'] = None; from processkit.cli.main import entry; entry()"


def _run(jsonl: str, native: bool, *command: str) -> subprocess.CompletedProcess:
    cli = cli_command() if native else [sys.executable, "-c", NO_NATIVE]
    return subprocess.run(
        [*cli, "run", "--jsonl", jsonl, "--", *command],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=SAFETY_NET,
    )


@pytest.mark.parametrize("native", [True, False], ids=["native", "no-native"])
def test_another_users_read_lock_on_the_stream_refuses_no_run(other_user, shared, native):  # noqa: F811
    python = shutil.which("python3", path="/usr/bin:/bin")  # one the second user can run
    if python is None:
        pytest.skip("needs a system python3 the second user can run")
    place = os.path.join(shared, "ci")
    os.mkdir(place)
    os.chmod(place, 0o755)
    jsonl = os.path.join(place, "run.jsonl")
    assert _run(jsonl, native, "true").returncode == 0
    os.chmod(jsonl, 0o644)  # as umask 022 leaves a stream: readable by every user
    locker = subprocess.Popen(
        [*as_user(other_user), python, "-c", LOCKER, jsonl],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd="/",
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline() == b"held\n", locker.stderr
        ran = _run(jsonl, native, "echo", "ran")
        assert (ran.returncode, ran.stdout) == (0, b"ran\n"), ran.stderr
        events = [json.loads(line) for line in open(jsonl, encoding="utf-8")]
        assert events[0]["event"] == "run_started" and events[-1]["event"] == "runner_exit"
        assert events[-1]["code"] == 0
    finally:
        locker.communicate(timeout=SAFETY_NET)  # its stdin closed: the lock goes with it
