"""``run --detach``'s last look at the stream, as the reference's own suite drives it: with
``PROCESSKIT_CLI_TEST_DETACH_FINAL_READ_GATE`` naming a directory, the launcher waits for its
copy to end, says so there, and reads the stream only once the test lets it; what it read is
the stream's first record alone (a fixed read-ahead), whatever the stream grew to."""

from __future__ import annotations

import json
import os

from conftest import cli_command, run_cli, start_cli, wait_for_file
from streams import stderr_lines

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
    wait_for_file(gate / "before-final-read")
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


def test_a_jsonl_that_fails_is_started_at_the_gate_too(tmp_path, isolated_registry):
    """``--jsonl /dev/full``: the stream cannot hold the proof, so the last look takes the
    readiness pipe's word (and its warning), as a launcher with no gate does."""
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "allow-final-read").write_bytes(b"go")
    env = {**os.environ, GATE: str(gate)}
    proc = run_cli("run", "--detach", "--run-id", "gated-full", "--jsonl", "/dev/full", "--", "true", env=env)
    assert (proc.returncode, stderr_lines(proc)) == (
        0,
        [
            "processkit-cli: warning: the detached run started, but its JSONL event logging is disabled: "
            "could not write a JSONL event: No space left on device (os error 28)"
        ],
    )
    assert (gate / "before-final-read").read_bytes() == b"ready"


def test_a_missing_rendezvous_is_said_in_the_reference_words(tmp_path, isolated_registry):
    """The reference's test hook fails a launch whose rendezvous it cannot publish (111)."""
    jsonl = tmp_path / "events.jsonl"
    env = {**os.environ, GATE: str(tmp_path / "absent")}
    proc = run_cli("run", "--detach", "--run-id", "gated-nowhere", "--jsonl", jsonl, "--", "true", env=env)
    assert (proc.returncode, proc.stderr.decode()) == (
        111,
        "processkit-cli: could not publish the internal final-read test rendezvous for run `gated-nowhere`: "
        "No such file or directory (os error 2)\n",
    )
