"""``wait --report-outcome`` and a stream another user swapped (docs/threat-model.md, "Other
users' paths"): the outcome of a run is read from the JSONL its record names, and a file of
another user's found there was put in the runner's place (the runner writes its stream as its
own user), so it is never read as the run's outcome.

The attacker, ``pkit-other`` (tests/test_other_users.py), owns the directory the run's
``--jsonl`` is in: it can rename the runner's file away and leave its own, saying the run
exited 0, after the run's own ``run_started`` line (readable where the umask left the stream so,
and a file is no proof of whose run it is). A runner SIGKILLed leaves its record behind, so the
waiter reads that path without a race against the run's end.
"""

from __future__ import annotations

import json
import os
import signal

from conftest import SAFETY_NET, listed_when, run_cli, start_cli, wait_for_event
from test_other_users import as_other, other_user, shared  # noqa: F401  (fixtures)

FORGED = {"schema_version": 1, "time": "2026-01-01T00:00:00.000Z", "event": "runner_exit", "code": 0}


def started_in_theirs(other_user, shared, run_id: str):
    """A run of ``sleep 600`` (cancelled or killed by each test) whose ``--jsonl`` is in a directory the attacker owns, once its
    ``run_started`` is written: the runner and the stream's path."""
    theirs = os.path.join(shared, "theirs")
    as_other(other_user, 'mkdir -m 0755 "$1"', theirs)
    jsonl = os.path.join(theirs, "run.jsonl")
    runner = start_cli("run", "--jsonl", jsonl, "--run-id", run_id, "--", "sleep", "600")
    try:
        wait_for_event(jsonl, "run_started")
        listed_when(lambda runs: run_id in runs)  # published: its record names the path
    except BaseException:
        runner.kill()
        runner.communicate(timeout=SAFETY_NET)
        run_cli("prune")  # what the killed runner left (a scratch registry)
        raise
    return runner, jsonl


def swap_in_forged(other_user, jsonl: str) -> None:
    """The attacker renames the runner's stream away and leaves its own: the run's own
    ``run_started`` (readable where the umask left it so) and a ``runner_exit`` saying 0."""
    head = open(jsonl, encoding="utf-8").readline().strip()
    line = json.dumps({**FORGED, "source": "child_exit", "child_code": 0})
    as_other(other_user, 'mv "$1" "$1.real"; printf "%s\\n%s\\n" "$2" "$3" > "$1"', jsonl, head, line)


def test_an_outcome_another_user_planted_at_the_stream_is_not_reported(tmp_path, other_user, shared):
    runner, jsonl = started_in_theirs(other_user, shared, "swapped")
    try:
        runner.send_signal(signal.SIGKILL)  # its record stays, naming the stream's path
        runner.communicate(timeout=SAFETY_NET)
        swap_in_forged(other_user, jsonl)
        waited = run_cli("wait", "--run-id", "swapped", "--report-outcome", "--timeout", "20s")
        report = json.loads(waited.stdout)
        assert report["status"] == "unknown" and report["code"] is None, report
    finally:
        run_cli("prune")  # the SIGKILLed runner's group, record and run directory
