"""The human forms of ``inspect`` and ``attest`` laid out as the reference lays them out: each
label and its colon padded to two spaces past the longest, the members' table indented under
the snapshot (and again under ``inspect --all``'s "snapshot for" heading); ``doctor``'s lines in
the reference's words, this build's ``accounting:`` line aside."""

from __future__ import annotations

import os
import re

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_event

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
        peer, mechanism = lines[3].split()[1], lines[4].split()[1]
        assert attested.stderr.decode() == (
            f"processkit-cli: this process is not a member of run `shown`: the runner named the connecting "
            f"process (pid {peer}) from the control transport and it is not in that run's {mechanism} container\n"
        )
    finally:
        run_cli("kill", "--run-id", "shown")
        run.communicate(timeout=SAFETY_NET)


def _doctor(tmp_path, *args, registry=None) -> list[str]:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(scratch)}
    if registry is not None:
        env["PROCESSKIT_CLI_REGISTRY_DIR"] = str(registry)
    return run_cli("doctor", *args, env=env).stdout.decode().splitlines()


def test_doctor_prints_the_reference_lines(tmp_path):
    lines = _doctor(tmp_path, "--check-resource-controller", "--require-mechanism", "nowhere")
    assert re.fullmatch(r"processkit-cli \S+ on linux: NOT qualified \(\d+ms\)", lines[0])
    by_label = {line[2:].split(":", 1)[0]: line for line in lines[1:]}
    assert re.fullmatch(r"  registry:   \S+ \(owner-only: true, posix_0700\)", by_label["registry"])
    assert re.fullmatch(r"  containment: \S+ \(abrupt cleanup: \S+\)", by_label["containment"])
    assert re.fullmatch(
        r"  control:    \S+ \(unix_socket\); inspect saw [1-9]\d* member\(s\), cancel acknowledged: true, "
        r"run ended with source `control_cancel`",
        by_label["control"],
    )
    assert re.fullmatch(
        r"  cleanup:    confirmed empty: (true|false) \(kill error: false, read error: false, remaining: 0"
        r"(, post-kill snapshot inconclusive on this mechanism)?\); record removed: true, "
        r"endpoint released: true, scratch removed: true",
        by_label["cleanup"],
    )
    assert re.fullmatch(
        r"  resources:  `--max-processes 64` enforceable: (true( \(via .+\))?|false \(.+\))", by_label["resources"]
    )
    assert re.fullmatch(r"  phases:     registry \d+ms, launch \d+ms, .*", by_label["phases"])
    assert by_label["mismatch"].startswith("  mismatch:   requires containment mechanism `nowhere`")


def test_a_failed_doctor_names_its_failure_and_evidence_as_the_reference(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    lines = [line for line in _doctor(tmp_path, registry=tmp_path / "file" / "registry") if "accounting:" not in line]
    assert lines[1].startswith("  phases:     registry FAILED ")
    assert lines[2].startswith("  failure:    could not open the per-user run registry: ")
    assert lines[3].startswith(f"  diagnostics kept in {tmp_path / 'tmp'}")
