"""The human forms of ``inspect`` and ``attest`` laid out as the reference lays them out: each
label and its colon padded to two spaces past the longest, the members' table indented under
the snapshot (and again under ``inspect --all``'s "snapshot for" heading)."""

from __future__ import annotations

from conftest import run_cli, start_cli, wait_for_event

SNAPSHOT = ("snapshot_version", "run_id", "mechanism", "root_pid", "started_at", "jsonl", "capture_dir", "members")
ATTESTATION = ("attestation_version", "run_id", "verdict", "peer_pid", "mechanism", "checked_at")


def _labelled(lines: list[str], labels: tuple[str, ...], width: int) -> None:
    for line, label in zip(lines, labels, strict=True):
        assert line.startswith(f"{label + ':':<{width}}") and line[width] != " ", line


def test_inspect_and_attest_print_the_reference_layout(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    run = start_cli("run", "--jsonl", jsonl, "--run-id", "shown", "--", "sleep", "30")
    try:
        wait_for_event(jsonl, "run_started")
        inspected = run_cli("inspect", "--run-id", "shown")
        assert inspected.returncode == 0, inspected.stderr
        lines = inspected.stdout.decode().splitlines()
        _labelled(lines[:8], SNAPSHOT, 19)
        assert lines[0] == "snapshot_version:  2" and lines[1] == "run_id:            shown"
        assert lines[8].split() == ["PID", "PPID", "NAME", "START_TIME"] and lines[8].startswith("  PID")
        assert all(line.startswith("  ") and line[2].isdigit() for line in lines[9:]) and lines[9:]

        every = run_cli("inspect", "--all").stdout.decode().splitlines()
        heading = every.index("snapshot for shown:")
        assert every[heading + 1] == "  snapshot_version:  2"
        assert every[heading + 9].startswith("    PID")

        attested = run_cli("attest", "--run-id", "shown")
        assert attested.returncode == 115  # this test is not a member of the run
        lines = attested.stdout.decode().splitlines()
        _labelled(lines, ATTESTATION, 22)
        assert lines[0] == "attestation_version:  1" and lines[2] == "verdict:              not_a_member"
    finally:
        run_cli("kill", "--run-id", "shown")
        run.communicate(timeout=30)
