"""``events --run-id`` and a stream another user swapped (docs/threat-model.md, "Another local
user"): the stream a record names is its runner's, written as this user, so a file of another
user's found at that path was put in its place and is never read as the run's events, as
``wait --report-outcome`` never reads its outcome (tests/test_other_users_wait.py).

The attacker, ``pkit-other`` (tests/test_other_users.py), owns the directory the run's ``--jsonl``
is in: it renames the runner's file away and leaves its own, the run's own ``run_started`` and a
forged ``runner_exit`` saying it exited 0, which ended ``--follow`` (and an attached handle's
``events()``) while the run went on. Or it swaps a directory on the way for a link to an older
run's directory: the file there is root's, but its first ``run_started`` names that other run,
as ``wait --report-outcome`` judges a stream (``events.names_run``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

from conftest import SAFETY_NET, listed_when, run_cli, start_cli, wait_for_event
from test_other_users import as_other, other_user, shared  # noqa: F401  (fixtures)
from test_other_users_wait import started_in_theirs, swap_in_forged

ATTACH = """
import sys, processkit
try:
    print("read", [type(event).__name__ for event in processkit.attach(sys.argv[1]).events()])
except OSError as exc:
    print("refused", exc)
"""


def refused(run_id: str, *words: str) -> None:
    """``events --run-id`` (with and without ``--follow``) and an attached handle's ``events()``
    refuse the run's stream, saying ``words``, and show none of it."""
    for follow in ([], ["--follow"]):
        read = run_cli("events", "--run-id", run_id, "--json", *follow)
        assert read.returncode == 111, (follow, read.returncode, read.stderr)
        assert read.stdout == b"", (follow, read.stdout)
        assert f"cannot read events for run `{run_id}`".encode() in read.stderr, read.stderr
        assert all(word.encode() in read.stderr for word in words), read.stderr
    attached = subprocess.run(
        [sys.executable, "-c", ATTACH, run_id], capture_output=True, text=True, timeout=SAFETY_NET
    )  # the API's attached handle follows the same path
    assert attached.returncode == 0, attached.stderr
    assert attached.stdout.startswith("refused") and all(word in attached.stdout for word in words), attached.stdout


@contextlib.contextmanager
def cancelled_after(runner: subprocess.Popen, run_id: str) -> Iterator[None]:
    """The run is cancelled once the block is done (killed, should the block fail)."""
    try:
        yield
        assert run_cli("cancel", "--run-id", run_id).returncode == 0
        assert runner.wait(timeout=SAFETY_NET) == 108
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(timeout=SAFETY_NET)
            run_cli("prune")  # what the killed runner left (a scratch registry)


def test_events_by_run_id_refuse_a_stream_another_user_planted(tmp_path, other_user, shared):
    runner, jsonl = started_in_theirs(other_user, shared, "planted")
    with cancelled_after(runner, "planted"):
        swap_in_forged(other_user, jsonl)
        refused("planted", f"belongs to uid {other_user.pw_uid}", "that user can write what it says")
        named = run_cli("events", "--file", jsonl, "--json")  # a file named is read, whoever's
        assert named.returncode == 0 and b"runner_exit" in named.stdout, named.stderr


def test_events_by_run_id_refuse_another_runs_stream_a_swapped_link_leads_to(tmp_path, other_user, shared):
    older = tmp_path / "old"
    older.mkdir()
    assert run_cli("run", "--jsonl", str(older / "run.jsonl"), "--run-id", "older", "--", "true").returncode == 0
    sub = os.path.join(shared, "theirs", "sub")
    as_other(other_user, 'mkdir -m 0755 "$1" && mkdir -m 0755 "$1/sub"', os.path.dirname(sub))
    jsonl = os.path.join(sub, "run.jsonl")
    runner = start_cli("run", "--jsonl", jsonl, "--run-id", "linked", "--", "sleep", "600")
    with cancelled_after(runner, "linked"):
        wait_for_event(jsonl, "run_started")
        listed_when(lambda runs: "linked" in runs)
        as_other(other_user, 'mv "$1" "$1.real" && ln -s "$2" "$1"', sub, str(older))  # root's older stream
        refused("linked", "its first run_started names run `older`, not `linked`")
