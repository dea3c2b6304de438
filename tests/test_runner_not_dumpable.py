"""A run's child cannot read through its runner's /proc entry what ``--env-clear`` and
``--env-remove`` kept from it.

The runner stays alive as its child's parent, and was dumpable: a child of its user read
``/proc/$PPID/environ`` and found every variable the caller gave the runner (`PK_SECRET=...
processkit-cli run --env-clear -- tool`), where ``env -i tool`` leaves no process holding them;
it could list the runner's descriptors and attach to it (``ptrace``) as well. A runner that is a
process of its own (``run``, ``batch``, ``bench``) now makes itself not dumpable before its first
spawn, as the runner service does (tests/test_service_memfd_privacy.py).

The runner runs as a second OS user when the tests run as root (root reads any process's
entry whatever), as the test's own user otherwise: the child is always of the runner's user,
not privileged. Every path is the test's own (a directory it made)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import pytest

import processkit
from test_other_users import other_user  # noqa: F401 - the session's second user (a fixture)
from test_service_memfd_privacy import _as_user

# The child: what it can read of its runner, its parent, written where the test reads it.
ATTACK = r"""
import os, sys
parent, secret = os.getppid(), sys.argv[2].encode()
said = []
for entry in ("environ", "fd"):
    try:
        if entry == "environ":
            with open(f"/proc/{parent}/environ", "rb") as handle:
                said.append("environ read: secret " + ("found" if secret in handle.read() else "absent"))
        else:
            said.append(f"fd listed: {len(os.listdir(f'/proc/{parent}/fd'))}")
    except PermissionError:
        said.append(entry + " refused")
with open(sys.argv[1], "a") as out:
    out.write("; ".join(said) + "\n")
"""

SECRET = "pk-not-dumpable-0f3c9e"
SAID = "environ refused; fd refused"


@pytest.fixture
def place(request):
    """The runner's user (the second user as root, else this one) and a directory of theirs."""
    user = request.getfixturevalue("other_user") if os.geteuid() == 0 else None
    made = tempfile.mkdtemp(prefix="pk-dumpable-")
    if user is not None:
        os.chown(made, user.pw_uid, user.pw_gid)
    yield user, made
    shutil.rmtree(made)


@pytest.mark.parametrize("command", ["run", "batch", "bench"])
def test_a_child_cannot_read_what_env_clear_kept_from_it_in_its_runner(place, command):
    user, where = place
    prefix, python = _as_user(user)
    package = os.path.dirname(os.path.dirname(processkit.__file__))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": package,
        "PROCESSKIT_CLI_REGISTRY_DIR": os.path.join(where, "runs"),
        "HOME": where,
        "TMPDIR": where,
        "PK_SECRET": SECRET,  # the caller's, which --env-clear keeps from the child
    }
    if subprocess.run([*prefix, python, "-c", "import processkit.cli"], capture_output=True, env=env).returncode:
        pytest.skip("processkit is not importable by a second user here")
    report = os.path.join(where, "said")
    child = [python, "-c", ATTACK, report, SECRET]
    given = {
        "run": ["run", "--jsonl", os.path.join(where, "run.jsonl"), "--env-clear", "--", *child],
        "batch": ["batch", "--out", os.path.join(where, "out"), "--env-clear", "--", *child, ":::", "x"],
        # bench has no --env-clear: its child is refused its runner's entry all the same
        "bench": ["bench", "--runs", "1", "--warmup", "0", "--command", json.dumps(child)],
    }[command]
    done = subprocess.run(
        [*prefix, python, "-m", "processkit", *given], capture_output=True, env=env, cwd=where, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    with open(report) as said:
        lines = said.read().splitlines()
    assert lines and set(lines) == {SAID}, lines
    if command == "run":
        events = [json.loads(line) for line in open(os.path.join(where, "run.jsonl"))]
        assert events[-1]["event"] == "runner_exit" and events[-1]["code"] == 0
