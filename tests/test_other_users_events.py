"""``events --run-id`` and a stream another user swapped (docs/threat-model.md, "Another local
user"): the stream a record names is its runner's, written as this user, so a file of another
user's found at that path was put in its place and is never read as the run's events, as
``wait --report-outcome`` never reads its outcome (tests/test_other_users_wait.py).

The attacker, ``pkit-other`` (tests/test_other_users.py), owns the directory the run's ``--jsonl``
is in: it renames the runner's file away and leaves its own, the run's own ``run_started`` and a
forged ``runner_exit`` saying it exited 0, which ended ``--follow`` (and an attached handle's
``events()``) while the run went on.
"""

from __future__ import annotations

import subprocess
import sys

from conftest import SAFETY_NET, run_cli
from test_other_users import other_user, shared  # noqa: F401  (fixtures)
from test_other_users_wait import started_in_theirs, swap_in_forged

ATTACH = """
import processkit
try:
    print("read", [type(event).__name__ for event in processkit.attach("planted").events()])
except OSError as exc:
    print("refused", exc)
"""


def test_events_by_run_id_refuse_a_stream_another_user_planted(tmp_path, other_user, shared):
    runner, jsonl = started_in_theirs(other_user, shared, "planted")
    try:
        swap_in_forged(other_user, jsonl)
        for follow in ([], ["--follow"]):
            read = run_cli("events", "--run-id", "planted", "--json", *follow)
            assert read.returncode == 111, (follow, read.returncode, read.stderr)
            assert b"runner_exit" not in read.stdout, (follow, read.stdout)
            assert f"belongs to uid {other_user.pw_uid}".encode() in read.stderr, read.stderr
        attached = subprocess.run(
            [sys.executable, "-c", ATTACH], capture_output=True, text=True, timeout=SAFETY_NET
        )  # the API's attached handle follows the same path
        assert attached.returncode == 0, attached.stderr
        assert attached.stdout.startswith("refused") and f"belongs to uid {other_user.pw_uid}" in attached.stdout
        named = run_cli("events", "--file", jsonl, "--json")  # a file named is read, whoever's
        assert named.returncode == 0 and b"runner_exit" in named.stdout, named.stderr
        assert run_cli("cancel", "--run-id", "planted").returncode == 0
        assert runner.wait(timeout=SAFETY_NET) == 108
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(timeout=SAFETY_NET)
