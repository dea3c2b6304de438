"""A second OS user cannot reach another user's run through the control plane: ``inspect`` and
``cancel`` from ``pkit-other`` (created by test_other_users.py's fixture when the tests run as
root, skipped otherwise) are refused whether it names the owner's registry or its own, and a
direct connection to the run's control socket is refused by the kernel (its 0700 directory).
The run goes on throughout, and its owner still inspects and cancels it. Every path is the
test's own (a directory it made, world-traversable so the attacker reaches the registry itself)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import cli_command
from privileges import as_user
from test_other_users import other_user  # noqa: F401 - the session's second user (a fixture)


def _as(user, argv, env):
    return subprocess.run([*as_user(user), *argv], capture_output=True, env=env, cwd="/", timeout=60)


def test_another_user_can_neither_inspect_nor_cancel_a_run(other_user):  # noqa: F811
    place = tempfile.mkdtemp(prefix="pk-control-")  # world-traversable: the attacker reaches the registry
    os.chmod(place, 0o755)
    try:
        _attack(other_user, place)
    finally:
        shutil.rmtree(place)


def _attack(other_user, place: str) -> None:  # noqa: F811
    env = dict(os.environ, PROCESSKIT_CLI_REGISTRY_DIR=os.path.join(place, "runs"))
    if _as(other_user, [*cli_command(), "--version"], env).returncode != 0:
        pytest.skip("the installed processkit-cli is not readable by a second user here")
    cli = cli_command()
    runner = subprocess.Popen(
        [*cli, "run", "--jsonl", os.path.join(place, "v.jsonl"), "--run-id", "victim", "--", "sleep", "60"], env=env
    )
    try:
        for _ in range(600):  # registered once the owner's inspect answers
            if subprocess.run([*cli, "inspect", "--run-id", "victim"], env=env, capture_output=True).returncode == 0:
                break
            assert runner.poll() is None
            time.sleep(0.05)
        records = [name for name in os.listdir(env["PROCESSKIT_CLI_REGISTRY_DIR"]) if name.endswith(".json")]
        with open(os.path.join(env["PROCESSKIT_CLI_REGISTRY_DIR"], records[0])) as handle:
            endpoint = json.load(handle)["endpoint"]
        own = dict(env, PROCESSKIT_CLI_REGISTRY_DIR=os.path.join(place, "theirs"), HOME=place)
        for command in ("inspect", "cancel"):
            for where, words in ((env, "belongs to uid 0"), (own, "no run with that id")):
                done = _as(other_user, [*cli, command, "--run-id", "victim"], where)
                assert done.returncode != 0 and words in done.stderr.decode(), (command, done.stderr)
        probe = "import socket, sys\ntry:\n socket.socket(socket.AF_UNIX).connect(sys.argv[1])\nexcept PermissionError:\n sys.exit(7)"
        assert _as(other_user, [sys.executable, "-c", probe, endpoint], env).returncode == 7
        assert runner.poll() is None, "the run goes on"
        assert subprocess.run([*cli, "inspect", "--run-id", "victim"], env=env, capture_output=True).returncode == 0
        assert subprocess.run([*cli, "cancel", "--run-id", "victim"], env=env, capture_output=True).returncode == 0
        runner.wait(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
