"""``run --detach``'s last look at the stream, as the reference's own suite drives it: with
``PROCESSKIT_CLI_TEST_DETACH_FINAL_READ_GATE`` naming a directory, the launcher waits for its
copy to end, says so there, and reads the stream only once the test lets it; what it read is
the stream's first record alone (a fixed read-ahead), whatever the stream grew to."""

from __future__ import annotations

import json
import os

from conftest import cli_command, start_cli, wait_for_file

GATE = "PROCESSKIT_CLI_TEST_DETACH_FINAL_READ_GATE"
SNAPSHOTS = 16 * 1024


def _gated_launch(tmp_path, run_id: str):
    gate = tmp_path / "gate"
    gate.mkdir()
    jsonl = tmp_path / "events.jsonl"
    # --argv-raw and an argument heavy in escapes make the first record long (over 8 KiB).
    launcher = start_cli(
        "run",
        "--jsonl",
        jsonl,
        "--run-id",
        run_id,
        "--detach",
        "--argv-raw",
        "--",
        *cli_command(),
        "--version",
        '\\"\n\t' * 1024,
        env={**os.environ, GATE: str(gate)},
    )
    wait_for_file(gate / "before-final-read", timeout=30)
    assert launcher.poll() is None, "the launcher waits at the gate before its last look"
    return launcher, gate, jsonl


def _grown(jsonl) -> tuple[bytes, int]:
    """The stream with SNAPSHOTS interval snapshots before its last line; its first record's length."""
    original = jsonl.read_bytes()
    lines = original.splitlines(keepends=True)
    assert json.loads(lines[0])["event"] == "run_started"
    assert json.loads(lines[-1])["event"] == "runner_exit", "the copy has ended before the gate"
    snapshot = {
        "schema_version": 1,
        "time": "2026-08-20T18:00:00.000Z",
        "event": "members_snapshot",
        "reason": "interval",
        "read_error": False,
        "members": [],
    }
    filler = (json.dumps(snapshot, separators=(",", ":")) + "\n").encode() * SNAPSHOTS
    return b"".join(lines[:-1]) + filler + lines[-1], len(lines[0])


def test_the_last_look_reads_the_first_record_and_no_more(tmp_path):
    launcher, gate, jsonl = _gated_launch(tmp_path, "gated-read")
    grown, first = _grown(jsonl)
    assert first > 8 * 1024, "the first record takes more than one read"
    jsonl.write_bytes(grown)
    (gate / "allow-final-read").write_bytes(b"go")
    _, stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == 0, stderr
    examined, fetched = map(int, (gate / "final-read-counts").read_text().split())
    assert examined == first
    assert examined <= fetched < len(grown) // 4, (examined, fetched, len(grown))


def test_the_last_look_decides_the_start(tmp_path):
    """A first record that is not this run's run_started, met at the last look: not started,
    however the copy ended (its 0 is outside the band: a setup failure, 111)."""
    launcher, gate, jsonl = _gated_launch(tmp_path, "gated-lost")
    lines = jsonl.read_bytes().splitlines(keepends=True)
    jsonl.write_bytes(b"".join(lines[1:]))
    (gate / "allow-final-read").write_bytes(b"go")
    _, stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == 111, stderr
    assert b"run `gated-lost` did not start" in stderr
    examined, fetched = map(int, (gate / "final-read-counts").read_text().split())
    assert examined == len(lines[1]) and fetched >= examined
