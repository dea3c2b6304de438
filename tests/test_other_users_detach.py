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


def test_a_proof_another_user_puts_at_the_stream_is_not_taken(tmp_path, other_user, shared, isolated_registry):
    theirs = os.path.join(shared, "theirs")
    as_other(other_user, 'mkdir -m 0755 "$1"', theirs)
    jsonl = os.path.join(theirs, "run.jsonl")
    gate = tmp_path / "gate"
    gate.mkdir()
    launcher = start_cli(
        "run",
        "--detach",
        "--run-id",
        "forged-start",
        "--jsonl",
        jsonl,
        "--",
        str(tmp_path / "no-such-program"),
        env={**os.environ, GATE: str(gate)},
    )
    try:
        wait_for_file(gate / "before-final-read")  # the copy has ended: its child never started
        forged = {"schema_version": 1, "time": "2026-01-01T00:00:00.000Z", "event": "run_started"}
        line = json.dumps({**forged, "run_id": "forged-start"})
        as_other(other_user, 'cd "$1" && mv run.jsonl moved.jsonl && printf "%s\\n" "$2" > run.jsonl', theirs, line)
        (gate / "allow-final-read").write_bytes(b"go")
        _, stderr = launcher.communicate(timeout=SAFETY_NET)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate(timeout=SAFETY_NET)
    assert launcher.returncode == 101, stderr  # the copy's own code, relayed: not 0, `started`
    assert b"run `forged-start` did not start" in stderr
    assert b"not found" in stderr, stderr  # the copy's words, from the stream it wrote
