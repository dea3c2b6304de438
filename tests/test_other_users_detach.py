"""``run --detach``'s proof and a stream another user swapped (docs/threat-model.md, "Other
users' paths"): the launcher takes the run as started only from the file it made at ``--jsonl``,
read through its own descriptor, never from what is at that path later.

The attacker, ``pkit-other`` (tests/test_other_users.py), owns the directory the stream is in: it
can rename the launcher's file away and leave its own, whose first line is this run's
``run_started`` (the run id is on the copy's command line, which every user can read). The copy
here never starts its child (no such program), so a launcher that read that file said `started`
(0) for a run that never ran. The reference's own test rendezvous holds the launcher between
its copy's end and its last look at the stream, where the swap is made without a race.
"""

from __future__ import annotations

import json
import os

from conftest import SAFETY_NET, start_cli, wait_for_file
from test_other_users import as_other, other_user, shared  # noqa: F401  (fixtures)

GATE = "PROCESSKIT_CLI_TEST_DETACH_FINAL_READ_GATE"


def _forged_launch(tmp_path, other_user, shared, run_id: str, attack: str, **options):
    """``run --detach`` of a copy that never starts its child, its ``--jsonl`` in a directory of
    the other user's, who runs ``attack`` there (``$2``: this run's forged ``run_started``) once
    the copy has ended: the launcher's return code, its stderr and the stream's path."""
    theirs = os.path.join(shared, "theirs")
    as_other(other_user, 'mkdir -m 0755 "$1"', theirs)
    jsonl = os.path.join(theirs, "run.jsonl")
    gate = tmp_path / "gate"
    gate.mkdir()
    command = ["run", "--detach", "--run-id", run_id, "--jsonl", jsonl, "--", tmp_path / "no-such-program"]
    launcher = start_cli(*command, env={**os.environ, GATE: str(gate)}, **options)
    try:
        wait_for_file(gate / "before-final-read")  # the copy has ended: its child never started
        forged = {"schema_version": 1, "time": "2026-01-01T00:00:00.000Z", "event": "run_started"}
        as_other(other_user, attack, theirs, json.dumps({**forged, "run_id": run_id}))
        (gate / "allow-final-read").write_bytes(b"go")
        _, stderr = launcher.communicate(timeout=SAFETY_NET)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate(timeout=SAFETY_NET)
    return launcher.returncode, stderr, jsonl


def test_a_proof_another_user_puts_at_the_stream_is_not_taken(tmp_path, other_user, shared, isolated_registry):
    swap = 'cd "$1" && mv run.jsonl moved.jsonl && printf "%s\\n" "$2" > run.jsonl'
    code, stderr, _ = _forged_launch(tmp_path, other_user, shared, "forged-start", swap)
    assert code == 101, stderr  # the copy's own code, relayed: not 0, `started`
    assert b"run `forged-start` did not start" in stderr
    assert b"not found" in stderr, stderr  # the copy's words, from the stream it wrote
    assert b"(the file there now is not the one this launcher made)" in stderr, stderr


def test_a_stream_the_umask_leaves_writable_loses_it_where_others_can_change_its_directory(
    tmp_path, other_user, shared, isolated_registry
):
    """Under umask 000 the launcher's file would be writable by all: the directory's owner
    rewrote its first line in place, by name, as this run's ``run_started``, and the launcher
    said started (0) for a copy that never started its child. It loses group and other write
    before the copy starts, so the attempt is refused."""
    rewrite = 'printf "%s\\n" "$2" | dd of="$1/run.jsonl" conv=notrunc 2>/dev/null || true'
    code, stderr, jsonl = _forged_launch(tmp_path, other_user, shared, "forged-in-place", rewrite, umask=0)
    assert code == 101, stderr  # the copy's own failure, relayed: not 0, `started`
    assert b"run `forged-in-place` did not start" in stderr
    assert os.stat(jsonl).st_mode & 0o777 == 0o644
