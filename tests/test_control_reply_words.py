"""A runner's reply a control client cannot take is said in the reference's words and kinds:
a refusal's own text is the reason, a reply for another run or another verb is
``control_unreachable``, and only a version this client does not read is
``incompatible_contract`` (docs/control-plane.md §1.3). Each case drives the installed
processkit-cli against a fake runner that answers with the given line."""

from __future__ import annotations

import fcntl
import json
import os
import socket

import pytest

from conftest import run_cli
from control_support import registry_record
from test_fuzz_inputs import ACK, ATTESTATION, SNAPSHOT, FakeRunner, fake_runner  # noqa: F401

NEWER = (
    "the runner answered with control-plane snapshot version 3, and this client reads versions 1 to 2 "
    "(the runner is a newer build than this client, so what its version changed is unknown here); the reply "
    "was refused rather than rendered under semantics its sender never promised — inspect this run with a "
    "processkit-cli build that implements its snapshot version (for a newer runner, one at least as new as "
    "the binary that started the run)"
)
CASES = [
    ("cancel", {"error": "no such verb"}, "control_unreachable", "no such verb"),
    ("cancel", {**ACK, "run_id": "other"}, "control_unreachable", "the runner did not acknowledge the command"),
    ("cancel", {**ACK, "action": "kill"}, "control_unreachable", "the runner did not acknowledge the command"),
    ("cancel", {**ACK, "accepted": False}, "control_unreachable", "the runner did not acknowledge the command"),
    ("cancel", {**ACK, "action": "inspect"}, "control_unreachable", "the runner did not acknowledge the command"),
    ("inspect", {**SNAPSHOT, "run_id": "other"}, "control_unreachable", "the runner returned a snapshot for a different run"),
    ("attest", {**ATTESTATION, "run_id": "other"}, "control_unreachable", "the runner returned an attestation for a different run"),
    ("inspect", {**SNAPSHOT, "snapshot_version": 3}, "incompatible_contract", NEWER),
    ("inspect", [1], "control_unreachable", "the runner sent an unreadable response: it is not a JSON object"),
]  # fmt: skip


@pytest.mark.parametrize("verb, reply, kind, why", CASES)
def test_a_reply_the_client_cannot_take_is_said_in_the_reference_words(fake_runner, verb, reply, kind, why):  # noqa: F811
    fake_runner.reply = json.dumps(reply).encode() + b"\n"
    env = {**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": fake_runner.registry}
    done = run_cli("--error-format", "json", verb, "--run-id", "fake", env=env)
    assert (done.returncode, done.stdout) == (103, b""), done.stderr
    envelope = json.loads(done.stderr)
    assert (envelope["kind"], envelope["message"]) == (kind, f"cannot {verb} run `fake`: {why}")


@pytest.mark.parametrize(
    "reply, why",
    [
        (b"x" * 65536, "line exceeded the 65536-byte control-plane limit without a terminating newline"),
        (b'{"accepted":true', "the peer closed the connection before terminating its control-plane line"),
        (b'{"run_id":"\xff"}\n', "stream did not contain valid UTF-8"),
        (b"", "the runner closed the connection before answering (it may have just exited)"),
    ],
    ids=["overlong", "cut", "not-utf-8", "empty"],
)
def test_a_reply_line_the_client_cannot_read_is_said_in_the_reference_words(fake_runner, reply, why):  # noqa: F811
    """The reference reads a reply as it reads a request (read_bounded_line, tokio's read_line)."""
    fake_runner.reply = reply
    env = {**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": fake_runner.registry}
    done = run_cli("--error-format", "json", "inspect", "--run-id", "fake", env=env)
    assert (done.returncode, done.stdout) == (103, b""), done.stderr
    envelope = json.loads(done.stderr)
    assert (envelope["kind"], envelope["message"]) == ("control_unreachable", f"cannot inspect run `fake`: {why}")


def test_a_runner_that_refuses_the_connection_is_said_with_the_errors_number(tmp_path):
    """As the reference's connect_live: the system's error as Rust shows it, its number too."""
    runner = FakeRunner(tmp_path / "registry")
    os.unlink(runner.endpoint)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(runner.endpoint)  # bound and never listening: ECONNREFUSED
    try:
        done = run_cli(
            "inspect", "--run-id", "fake", env={**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": runner.registry}
        )
    finally:
        silent.close()
        runner.close()
    why = "could not reach the live runner (it may have just exited): Connection refused (os error 111)"
    assert (done.returncode, done.stderr) == (103, f"processkit-cli: cannot inspect run `fake`: {why}\n".encode())


@pytest.mark.parametrize("verb", ["cancel", "kill"])
def test_an_all_target_that_declines_is_said_in_the_fan_outs_words(fake_runner, verb):  # noqa: F811
    """As the reference's aggregate ack check: the per-target error names the snapshotted target."""
    fake_runner.reply = json.dumps({**ACK, "action": verb, "accepted": False}).encode() + b"\n"
    env = {**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": fake_runner.registry}
    done = run_cli(verb, "--all", env=env)
    assert done.returncode == 103, done.stderr
    [target] = json.loads(done.stdout)
    why = "the runner did not acknowledge the command for the snapshotted target"
    assert (target["status"], target["error"]) == ("failed", f"cannot {verb} run `fake`: {why}")


def _made_unreadable(path) -> None:
    path.unlink()
    path.symlink_to(path.with_name("elsewhere.json"))  # a record is never read through a link


@pytest.mark.parametrize(
    "spoil, why",
    [
        (lambda path: path.write_text("{"), "the registry record no longer passes validation"),
        (_made_unreadable, "Too many levels of symbolic links (os error 40)"),
        (lambda path: path.write_bytes(b" " * 65537), "registry record exceeds the maximum supported size"),
        (lambda path: path.write_bytes(b'{"run_id": "z\xffz"}'), "invalid utf-8 sequence of 1 bytes from index 13"),
        (lambda path: path.write_bytes(b'{"run_id": "\xe2\x82'), "incomplete utf-8 byte sequence from index 12"),
    ],
    ids=["invalid", "unreadable", "oversized", "not-utf-8", "cut-utf-8"],
)
def test_an_all_target_whose_record_went_bad_is_said_as_the_reference(tmp_path, spoil, why):
    """A record that fails its checks by its turn, and one that cannot be read, are told apart
    as the reference's probe_entry does (one too large or not UTF-8 in its read_record_text's
    words, Rust's for a UTF-8 error); the first target's runner spoils the second's record
    as it answers, so the change lands between the snapshot and the second's turn."""
    registry = tmp_path / "registry"
    runner = FakeRunner(registry)
    later = registry / "run-z.json"
    later.write_text(json.dumps(registry_record("zz", "run-z.lock")))
    lock = os.open(registry / "run-z.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)

    def acknowledge() -> bytes:
        spoil(later)
        return json.dumps(ACK).encode() + b"\n"

    runner.reply = acknowledge
    try:
        done = run_cli("cancel", "--all", env={**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": str(registry)})
    finally:
        runner.close()
        os.close(lock)
    assert done.returncode == 103, done.stderr
    report = {target["run_id"]: target for target in json.loads(done.stdout)}
    assert report["fake"]["status"] == "accepted"
    said = f"cannot cancel run `zz`: could not re-read the snapshotted registry record: {why}"
    assert (report["zz"]["status"], report["zz"]["error"]) == ("failed", said)


USAGE = {"usage_version": 1, "run_id": "fake", "read_error": False, "sources": {}}
USAGE_NEWER = (
    "the runner answered with control-plane usage version 2, and this client reads version 1; the reply was "
    "refused rather than read as figures its sender never promised — read this run's usage with a "
    "processkit-cli build that implements its usage version"
)


@pytest.mark.parametrize(
    "reply, kind, why",
    [
        ({**USAGE, "usage_version": 2}, "incompatible_contract", USAGE_NEWER),
        ({**USAGE, "read_error": "no"}, "control_unreachable", "the runner sent an unreadable response: it does not have the documented shape of a usage reply"),
    ],
)  # fmt: skip
def test_inspect_usage_is_incompatible_only_for_a_version_it_does_not_read(fake_runner, reply, kind, why):  # noqa: F811
    fake_runner.reply = json.dumps(reply).encode() + b"\n"
    env = {**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": fake_runner.registry}
    done = run_cli("--error-format", "json", "inspect", "--run-id", "fake", "--usage", env=env)
    assert (done.returncode, done.stdout) == (103, b""), done.stderr
    envelope = json.loads(done.stderr)
    assert (envelope["kind"], envelope["message"]) == (kind, f"cannot read the usage of run `fake`: {why}")
